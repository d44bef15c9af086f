"""Judging fills of masked spans in the sandbox, and the masking run that keeps only rows whose tests judge.

A fill is judged as ``codegym_data.verify`` judges a rewritten program: ``prefix + fill + suffix`` is the
whole program, sent with ``evaluate_completions`` (no code extraction) against the row's tests, after the
row's starter code. At creation every row is judged twice: with its own middle (the reference, which must
pass) and, unless told otherwise, with the span replaced by ``pass`` at its indentation (which must fail:
if it passes, the tests do not depend on the span and would pass a wrong fill too). Rows failing either
are dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task
from codegym_sandbox.verdicts import Verdict

from ..output import output_paths, write_jsonl, write_report
from .dataset import CodeMaskDataset, MaskRow
from .fim import DEFAULT_TOKENS, FimFormat, format_row
from .report import MaskReport

Progress = Callable[[str, int, int], None]  # (stage, done, total): "masking" then "verifying"

_INDENT = re.compile(r"[ \t]*")


def reassemble(row: MaskRow, fill: str) -> str:
    """The program with ``fill`` in the span's place; a fill of whole lines may leave out its last newline."""
    if row.middle.endswith("\n") and not fill.endswith("\n"):
        fill += "\n"
    return row.prefix + fill + row.suffix


def blank_fill(row: MaskRow) -> str:
    """A fill that does nothing: ``pass`` at the indentation of the span's first line."""
    indent = _INDENT.match(row.middle)
    return f"{indent.group() if indent else ''}pass\n"


async def judge_fills(
    fills: Sequence[tuple[MaskRow, str]], scorer: Scorer, on_judged: Callable[[int, int], None] | None = None
) -> list[Score]:
    """The score of each ``(row, fill)``, in order; the fills of one task go to the sandbox in one request.
    ``on_judged(done, total)`` is called as each task's fills come back."""
    groups: dict[str, list[int]] = defaultdict(list)
    tasks: dict[str, Task] = {}
    for i, (row, _) in enumerate(fills):
        groups[row.task_id].append(i)
        tasks.setdefault(row.task_id, row.task())
    completions = {task_id: [reassemble(*fills[i]) for i in indices] for task_id, indices in groups.items()}
    scores: list[Score | None] = [None] * len(fills)

    def judged(task: Task, task_scores: list[Score]) -> None:
        for i, score in zip(groups[task.task_id], task_scores, strict=True):
            scores[i] = score
        if on_judged is not None:
            on_judged(sum(s is not None for s in scores), len(fills))

    await evaluate_completions(tasks.values(), completions, scorer, extract=False, on_scored=judged)
    assert all(s is not None for s in scores)  # evaluate_completions judges every task with completions
    return [s for s in scores if s is not None]


async def verify_fill(row: MaskRow, fill: str, scorer: Scorer) -> Score:
    """The sandbox's verdict on ``fill`` in ``row``'s span (``score.verdict is Verdict.AC``: every test passes)."""
    return (await judge_fills([(row, fill)], scorer))[0]


@dataclass
class Dropped:
    """A selected span that is not in ``masked.jsonl``, and why (``dropped.jsonl``)."""

    id: str
    task_id: str
    reason: str  # reference_failed, untested, sandbox_error
    verdict: Verdict | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MaskRun:
    """The kept rows, the report, and what was dropped."""

    rows: list[MaskRow]
    report: MaskReport
    dropped: list[Dropped] = field(default_factory=list)

    def write(
        self, directory: str | Path, fim_format: FimFormat = "fields", tokens: Sequence[str] = DEFAULT_TOKENS
    ) -> dict[str, Path]:
        """Write ``masked.jsonl``, ``report.md``, ``report.json`` and ``dropped.jsonl``; the paths by name."""
        paths = output_paths(directory, "masked.jsonl", "dropped.jsonl")
        write_jsonl(paths["masked.jsonl"], (format_row(row, fim_format, tokens) for row in self.rows))
        write_report(self.report, paths)
        write_jsonl(paths["dropped.jsonl"], (dropped.to_dict() for dropped in self.dropped))
        return paths


def read_rows(path: str | Path) -> list[MaskRow]:
    """The rows of a ``masked.jsonl`` (any FIM format)."""
    with Path(path).open(encoding="utf-8") as fh:
        return [MaskRow.from_dict(json.loads(line)) for line in fh if line.strip()]


async def mask_and_verify(
    tasks: Iterable[Task],
    masker: CodeMaskDataset,
    scorer: Scorer,
    *,
    require_tested: bool = True,
    progress: Progress | None = None,
) -> MaskRun:
    """Mask every task's reference solution, judge each row's reference (and blank) fill, keep rows that judge."""
    tasks = list(tasks)
    report = MaskReport(
        masker.dataset,
        masker.seed,
        masker.probability,
        masker.metrics,
        masker.minimum,
        masker.max_lines,
        require_tested,
    )
    counts = report.counts
    functions: list[dict[str, Any]] = []
    candidates: list[dict[str, Any]] = []
    rows: list[MaskRow] = []
    for done, task in enumerate(tasks, 1):
        found = masker.candidates(task)
        counts.tasks += 1
        if found.source is None:
            counts.no_solution += 1
        counts.functions += len(found.functions)
        counts.spans += found.all_spans
        functions += [f.function.metrics.to_dict() for f in found.functions]
        candidates += [s.metrics.to_dict() for f in found.functions for s in f.spans]
        rows += masker.rows_of(found)
        if progress is not None:
            progress("masking", done, len(tasks))
    counts.candidates, counts.selected = len(candidates), len(rows)
    fills = [(row, row.middle) for row in rows]
    if require_tested:
        fills += [(row, blank_fill(row)) for row in rows]

    def on_judged(done: int, total: int) -> None:
        if progress is not None:
            progress("verifying", done, total)

    on_judged(0, len(fills))
    scores = await judge_fills(fills, scorer, on_judged) if fills else []
    kept, dropped = [], []
    for i, row in enumerate(rows):
        reference, blank = scores[i], scores[len(rows) + i] if require_tested else None
        unjudged = reference if reference.sandbox_error else blank
        if unjudged is not None and unjudged.sandbox_error:
            counts.sandbox_errors += 1
            dropped.append(Dropped(row.id, row.task_id, "sandbox_error", Verdict.SE, unjudged.error))
        elif reference.verdict is not Verdict.AC:
            counts.reference_failed += 1
            dropped.append(Dropped(row.id, row.task_id, "reference_failed", reference.verdict, reference.error))
        elif blank is not None and blank.verdict is Verdict.AC:
            counts.untested += 1
            dropped.append(Dropped(row.id, row.task_id, "untested", blank.verdict))
        else:
            kept.append(row)
    counts.emitted = len(kept)
    report.measure("functions", functions)
    report.measure("candidate spans", candidates)
    report.measure("emitted spans", [r.metrics for r in kept])
    report.count_nodes([str(r.span["node"]) for r in kept])
    return MaskRun(kept, report, dropped)
