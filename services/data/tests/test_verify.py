"""Verification in a real sandbox: every transformation on all 164 HumanEval solutions, on every dataset of the
task library, and the counting of rewrites that fail or whose original fails."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from codegym_data.transform import TRANSFORMATIONS, Compose, Context, ForToWhile, Transformation, parse_transformations
from codegym_data.verify import TransformRun, transform_and_verify
from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import DATASETS, Task, load_tasks, read_task_file

HUB = Path(__file__).parents[2] / "evaluator" / "tests" / "fixtures" / "hub"  # the evaluator's copies of the hub

# How many of the 164 HumanEval solutions each transformation rewrites, at least (dead_code leaves alone the one
# that calls eval): a transformation that silently stopped applying fails here, not only one that breaks programs.
APPLIED_AT_LEAST = {
    "for_to_while": 70,
    "while_to_for": 2,
    "rename": 125,
    "invert_if": 40,
    "comprehension_to_loop": 15,
    "loop_to_comprehension": 4,
    "dead_code": 163,
    "reorder": 30,
    "remove_docstrings": 160,
}


def run(tasks: Sequence[Task], transformations: Sequence[Transformation], url: str, seed: int = 0) -> TransformRun:
    async def go() -> TransformRun:
        async with Scorer(url, concurrency=4) as scorer:
            return await transform_and_verify(tasks, transformations, scorer, seed=seed, dataset="test")

    return asyncio.run(go())


@pytest.fixture(scope="module")
def humaneval_run(sandbox_url: str) -> TransformRun:
    """Every transformation alone, and all of them composed, on the 164 HumanEval solutions, judged in one batch."""
    transformations = [*parse_transformations("all"), Compose(parse_transformations("all"))]
    return run(load_tasks("humaneval"), transformations, sandbox_url)


def test_every_transformed_humaneval_solution_still_passes(humaneval_run: TransformRun) -> None:
    report = humaneval_run.report
    assert report.rows == 164 and report.originals_failed == []
    for stats in report.stats:
        assert stats.errors == 0 and stats.no_solution == 0 and stats.sandbox_errors == 0, stats
        assert stats.original_failed == 0 and stats.dropped == 0, [r for r in humaneval_run.rejected][:3]
        assert stats.applied + stats.not_applicable == 164 and stats.passed == stats.applied
        assert stats.applied >= APPLIED_AT_LEAST.get(stats.transformation, 164), stats
    assert len(humaneval_run.tasks) == sum(s.passed for s in report.stats)


def test_kept_rows_are_a_task_file_the_evaluator_judges(
    humaneval_run: TransformRun, tmp_path: Path, sandbox_url: str
) -> None:
    paths = humaneval_run.write(tmp_path)
    tasks = read_task_file(paths["tasks.jsonl"])
    assert tasks == humaneval_run.tasks and load_tasks("jsonl", path=paths["tasks.jsonl"]) == tasks
    sample = tasks[::25]
    for task in sample:
        ast.parse(task.metadata["canonical_solution"])  # a whole program
    completions = {t.task_id: [t.metadata["canonical_solution"]] for t in sample}

    async def judge() -> dict[int, float]:
        async with Scorer(sandbox_url) as scorer:
            return (await evaluate_completions(sample, completions, scorer, extract=False)).pass_at_k

    assert asyncio.run(judge()) == {1: 1.0}


class _BreaksAddition(Transformation):
    """A transformation that is wrong on purpose: every ``+`` becomes ``-``."""

    name = "breaks_addition"
    summary = "a wrong rewrite"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                node.op, changed = ast.Sub(), True
        return changed


def test_rewrites_that_fail_are_dropped_and_failing_originals_counted_apart(sandbox_url: str) -> None:
    humaneval = load_tasks("humaneval", limit=20)
    wrong_original = Task(
        task_id="own/1",
        prompt="Double x.",
        kind="assert",
        tests=[{"assert_code": "assert double(2) == 4"}],
        entry_point="double",
        metadata={"canonical_solution": "def double(x):\n    for _ in range(1):\n        pass\n    return x + x + 1\n"},
    )
    result = run([*humaneval, wrong_original], [_BreaksAddition(), ForToWhile()], sandbox_url)
    broken, loops = result.report.stats
    assert broken.dropped >= 4 and broken.passed + broken.dropped + broken.original_failed == broken.applied
    assert broken.original_failed == 1 and loops.original_failed == 1 and loops.dropped == 0
    assert result.report.originals_failed == ["own/1"]
    kept = {t.task_id for t in result.tasks}
    assert "own/1#for_to_while" not in kept and "own/1#breaks_addition" not in kept
    dropped = [r for r in result.rejected if r.reason == "dropped"]
    assert len(dropped) == broken.dropped and all(r.transformation == "breaks_addition" and r.verdict for r in dropped)
    assert all(f"{r.task_id}#breaks_addition" not in kept for r in dropped)


@pytest.mark.parametrize("dataset", sorted(set(DATASETS) - {"jsonl", "humaneval"}))
def test_every_dataset_of_the_task_library(dataset: str, sandbox_url: str) -> None:
    tasks = load_tasks(dataset, hub_root=HUB)
    result = run(tasks, [TRANSFORMATIONS[name]() for name in TRANSFORMATIONS], sandbox_url)
    with_solution = tasks[0].metadata.get("canonical_solution") is not None
    for stats in result.report.stats:
        assert stats.errors == 0 and stats.dropped == 0 and stats.sandbox_errors == 0, (dataset, stats)
        if dataset == "livecodebench":  # its rows carry no reference solution
            assert stats.no_solution == len(tasks)
    dead_code = result.report.stats[list(TRANSFORMATIONS).index("dead_code")]
    assert not with_solution or dead_code.passed > 0
