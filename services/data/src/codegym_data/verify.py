"""Transform a dataset's reference solutions and keep only the rewrites that still pass their tests.

Every rewritten program, and the original solution of every row that got one, is judged in the sandbox in
one batch (``evaluate_completions``). A rewrite is kept when it passes; it is dropped when the original
passes and it does not. When the original itself fails, the rewrite is not judged against it: the row is
counted as ``original_failed``, not as the transformation's fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task, write_task_file
from codegym_sandbox.verdicts import Verdict

from . import solutions
from .output import output_paths, write_jsonl, write_report
from .report import TransformReport, TransformStats
from .transform import Transformation, row_rng

Progress = Callable[[str, int, int], None]  # (stage, done, total): "transforming" then "verifying"


@dataclass
class Rejected:
    """A rewrite that was not kept, and why (``dropped.jsonl``)."""

    task_id: str
    transformation: str
    reason: str  # dropped, original_failed, sandbox_error, error
    verdict: str | None = None
    error: str | None = None
    code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TransformRun:
    """The kept rewrites as tasks, the report, and what was not kept."""

    tasks: list[Task]
    report: TransformReport
    rejected: list[Rejected] = field(default_factory=list)

    def write(self, directory: str | Path, originals: Sequence[Task] = ()) -> dict[str, Path]:
        """Write ``tasks.jsonl`` (``originals`` first, then the kept rewrites, in codegym's task format),
        ``report.md``, ``report.json`` and ``dropped.jsonl`` into ``directory``; the paths by name."""
        paths = output_paths(directory, "tasks.jsonl", "dropped.jsonl")
        write_task_file([*originals, *self.tasks], paths["tasks.jsonl"])
        write_report(self.report, paths)
        write_jsonl(paths["dropped.jsonl"], (rejected.to_dict() for rejected in self.rejected))
        return paths


@dataclass
class _Candidate:
    task: Task  # the rewritten row
    origin: Task
    stats: TransformStats


def rewrite_all(
    tasks: Sequence[Task],
    transformations: Sequence[Transformation],
    *,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[list[_Candidate], list[TransformStats], list[Rejected]]:
    """Every transformation on every row's reference solution (not yet judged)."""
    refs = {t.task_id: solutions.reference(t) for t in tasks}
    candidates: list[_Candidate] = []
    rejected: list[Rejected] = []
    all_stats = []
    total, done = len(tasks) * len(transformations), 0
    if progress is not None:
        progress("transforming", 0, total)
    for transformation in transformations:
        stats = TransformStats(transformation.name, rows=len(tasks))
        all_stats.append(stats)
        for task in tasks:
            done += 1
            if progress is not None:
                progress("transforming", done, total)
            ref = refs[task.task_id]
            if ref is None:
                stats.no_solution += 1
                continue
            try:
                rng = row_rng(seed, transformation.name, task.task_id)
                code = transformation.transform_code(ref.source, rng, ref.keep)
            except Exception as exc:  # one row's failure is counted and reported, not the end of the run
                stats.errors += 1
                why = f"{type(exc).__name__}: {exc}"
                rejected.append(Rejected(task.task_id, transformation.name, "error", error=why))
                continue
            if code is None:
                stats.not_applicable += 1
                continue
            stats.applied += 1
            candidates.append(_Candidate(solutions.transformed(task, code, transformation.name, seed), task, stats))
    return candidates, all_stats, rejected


async def transform_and_verify(
    tasks: Sequence[Task],
    transformations: Sequence[Transformation],
    scorer: Scorer,
    *,
    seed: int = 0,
    dataset: str = "",
    progress: Progress | None = None,
) -> TransformRun:
    """Rewrite every row with every transformation, judge the rewrites and their originals, keep what passes."""
    candidates, all_stats, rejected = rewrite_all(tasks, transformations, seed=seed, progress=progress)
    origins = list({c.origin.task_id: c.origin for c in candidates}.values())
    completions: dict[str, list[str]] = {}
    for origin in origins:
        ref = solutions.reference(origin)
        assert ref is not None  # it has a rewrite, so it has a reference solution
        completions[origin.task_id] = [ref.completion]
    for candidate in candidates:
        completions[candidate.task.task_id] = [str(candidate.task.metadata["canonical_solution"])]
    scores: dict[str, Score] = {}
    total = len(completions)

    def judged(task: Task, task_scores: list[Score]) -> None:
        scores[task.task_id] = task_scores[0]
        if progress is not None:
            progress("verifying", len(scores), total)

    if progress is not None:
        progress("verifying", 0, total)
    if completions:
        every = [*origins, *(c.task for c in candidates)]
        await evaluate_completions(every, completions, scorer, extract=False, on_scored=judged)
    report = TransformReport(dataset, seed, len(tasks), originals_judged=len(origins), stats=all_stats)
    report.originals_failed = [o.task_id for o in origins if scores[o.task_id].verdict not in (Verdict.AC, Verdict.SE)]
    kept: list[Task] = []
    for candidate in candidates:
        original, rewritten, stats = scores[candidate.origin.task_id], scores[candidate.task.task_id], candidate.stats
        code = str(candidate.task.metadata["canonical_solution"])
        reason = None
        if original.sandbox_error or rewritten.sandbox_error:
            stats.sandbox_errors += 1
            reason = "sandbox_error"
        elif original.verdict is not Verdict.AC:
            stats.original_failed += 1
            reason = "original_failed"
        elif rewritten.verdict is Verdict.AC:
            stats.passed += 1
            kept.append(candidate.task)
        else:
            stats.dropped += 1
            reason = "dropped"
        if reason is not None:
            why = rewritten.error or original.error
            task_id = candidate.origin.task_id
            rejected.append(Rejected(task_id, stats.transformation, reason, rewritten.verdict, why, code))
    return TransformRun(kept, report, rejected)
