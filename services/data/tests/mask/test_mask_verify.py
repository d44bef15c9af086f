"""Fills judged in a real sandbox: the reassembled reference passes, wrong fills fail, and rows whose reference
fails or whose tests do not depend on the span are dropped and counted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from codegym_data import solutions
from codegym_data.mask.dataset import CodeMaskDataset, MaskRow
from codegym_data.mask.spans import function_spans
from codegym_data.mask.verify import MaskRun, blank_fill, judge_fills, mask_and_verify, reassemble, verify_fill
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task, load_tasks
from mask_support import own_task


def run(tasks: Sequence[Task], masker: CodeMaskDataset, url: str, require_tested: bool = True) -> MaskRun:
    async def go() -> MaskRun:
        async with Scorer(url, concurrency=4) as scorer:
            return await mask_and_verify(tasks, masker, scorer, require_tested=require_tested)

    return asyncio.run(go())


def judge(fills: Sequence[tuple[MaskRow, str]], url: str) -> list[Score]:
    async def go() -> list[Score]:
        async with Scorer(url, concurrency=4) as scorer:
            return await judge_fills(fills, scorer)

    return asyncio.run(go())


def source(task: Task) -> str:
    ref = solutions.reference(task)
    assert ref is not None
    return ref.source


@pytest.fixture(scope="module")
def humaneval_run(sandbox_url: str) -> MaskRun:
    """Two spans of every function of 12 HumanEval problems (15 functions: some have helpers)."""
    masker = CodeMaskDataset(probability=1.0, spans_per_function=2, seed=0, dataset="humaneval")
    return run(load_tasks("humaneval", limit=12), masker, sandbox_url)


def test_every_emitted_row_passes_with_its_own_middle(humaneval_run: MaskRun, sandbox_url: str) -> None:
    counts = humaneval_run.report.counts
    spans = [len(f.spans) for t in load_tasks("humaneval", limit=12) for f in function_spans(source(t))]
    assert counts.tasks == 12 and counts.no_solution == 0 and counts.functions == len(spans) == 15
    assert counts.selected == sum(min(2, n) for n in spans)  # two a function, or its only one
    assert counts.reference_failed == 0 and counts.sandbox_errors == 0
    assert counts.emitted + counts.untested == counts.selected and counts.emitted >= 20
    rows = humaneval_run.rows
    scores = judge([(r, r.middle) for r in rows] + [(r, blank_fill(r)) for r in rows], sandbox_url)
    assert [s.verdict for s in scores[: len(rows)]] == ["AC"] * len(rows)
    assert all(s.verdict != "AC" for s in scores[len(rows) :])  # the tests depend on every emitted span


def test_a_wrong_fill_fails_and_a_rewritten_right_one_passes(sandbox_url: str) -> None:
    task = load_tasks("humaneval", limit=3)[2]  # truncate_number: return number % 1.0
    (row,) = CodeMaskDataset(probability=1.0).mask(task)
    assert row.middle == "    return number % 1.0\n"

    async def go() -> list[str]:
        async with Scorer(sandbox_url) as scorer:
            fills = [
                "    return number % 1.0",
                "    return number - int(number)\n",
                "    return number // 1.0\n",
                "    return round(number % 1.0, 1)\n",
                "return number % 1.0\n",
            ]
            return [(await verify_fill(row, fill, scorer)).verdict for fill in fills]

    # No final newline is needed; another right body passes; a wrong one fails; a badly indented one does not
    # compile.
    right, other, wrong, rounded, unindented = asyncio.run(go())
    assert (right, other) == ("AC", "AC")
    assert wrong != "AC" and rounded != "AC" and unindented != "AC"
    assert reassemble(row, "    return 0.5") == row.prefix + "    return 0.5\n" + row.suffix


def test_a_reference_that_fails_drops_its_rows(sandbox_url: str) -> None:
    wrong = own_task(test="assert f([1, 2]) == 4")  # the solution returns 3
    result = run([wrong, *load_tasks("humaneval", limit=2)], CodeMaskDataset(probability=1.0), sandbox_url)
    counts = result.report.counts
    assert counts.reference_failed == 1 and counts.emitted == 2 and counts.selected == 3
    (dropped,) = result.dropped
    assert (dropped.task_id, dropped.reason, dropped.verdict) == ("own/1", "reference_failed", "WA")
    assert all(r.task_id != "own/1" for r in result.rows)


def test_spans_the_tests_do_not_depend_on_are_dropped_unless_asked_to_keep_them(sandbox_url: str) -> None:
    code = "def f(xs):\n    unused = len(xs)\n    return sum(xs)\n"
    masker = CodeMaskDataset(metrics="lines", probability=1.0, spans_per_function=3)
    result = run([own_task(code)], masker, sandbox_url)
    # Spans: the body (lines 2-3), "unused = ..." (2), the return (3). Without the assignment the tests pass.
    assert [(d.id, d.reason) for d in result.dropped] == [("own/1#mask:f:2-2", "untested")]
    assert sorted(r.id for r in result.rows) == ["own/1#mask:f:2-3", "own/1#mask:f:3-3"]
    kept = run([own_task(code)], masker, sandbox_url, require_tested=False)
    assert len(kept.rows) == 3 and kept.report.counts.untested == 0 and not kept.report.require_tested


def test_a_sandbox_that_cannot_be_reached_judges_nothing() -> None:
    result = run(load_tasks("humaneval", limit=1), CodeMaskDataset(probability=1.0), "http://127.0.0.1:9")
    assert result.rows == [] and result.report.counts.sandbox_errors == 1
    assert result.dropped[0].reason == "sandbox_error" and "sandbox unavailable" in (result.dropped[0].error or "")


def test_the_report_counts_and_measures(humaneval_run: MaskRun) -> None:
    report = humaneval_run.report.to_dict()
    assert report["counts"]["functions"] == 15 and report["counts"]["candidates"] == report["counts"]["spans"]
    emitted = report["distributions"]["emitted spans"]
    assert emitted["lines"]["count"] == len(humaneval_run.rows)
    assert emitted["cyclomatic"]["max"] == max(r.metrics["cyclomatic"] for r in humaneval_run.rows)
    assert sum(report["nodes"].values()) == len(humaneval_run.rows)
    table = humaneval_run.report.markdown()
    assert "| 12 | 0 | 15 |" in table and "emitted spans:" in table and "| halstead_volume |" in table
