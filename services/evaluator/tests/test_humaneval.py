"""HumanEval end to end through a real sandbox: the canonical solutions pass, wrong ones fail."""

from __future__ import annotations

import httpx
import pytest
from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task, load_tasks

pytestmark = pytest.mark.anyio
SANDBOX = "http://sandbox"


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks("humaneval")


def test_the_packaged_problems_load(tasks: list[Task]) -> None:
    assert len(tasks) == 164
    first = tasks[0]
    assert first.task_id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert first.kind == "assert" and first.starter_code == first.prompt
    assert "check(has_close_elements)" in first.tests[0]["assert_code"]
    assert load_tasks("humaneval", limit=3) == tasks[:3]


async def test_every_canonical_solution_passes_and_wrong_ones_fail(
    tasks: list[Task], sandbox: httpx.ASGITransport
) -> None:
    canonical = {t.task_id: [t.metadata["canonical_solution"]] for t in tasks}
    # Wrong on purpose: nothing returned, and the next problem's solution (same stub, other problem).
    ids = [t.task_id for t in tasks]
    wrong = {
        t.task_id: ["    return None\n", tasks[(i + 1) % len(tasks)].metadata["canonical_solution"]]
        for i, t in enumerate(tasks)
    }
    async with Scorer(SANDBOX, transport=sandbox, concurrency=4) as scorer:
        good = await evaluate_completions(tasks, canonical, scorer, extract=False)
        bad = await evaluate_completions(tasks, wrong, scorer, ks=(1, 2), extract=False)
    assert good.pass_at_k == {1: 1.0}, [r.task_id for r in good.per_task.values() if r.correct != 1]
    assert good.verdict_counts == {"AC": 164}
    passing = [tid for tid in ids if bad.per_task[tid].correct]
    assert passing == [], passing
    assert bad.pass_at_k == {1: 0.0, 2: 0.0}
    assert bad.sandbox_errors == 0
    assert set(bad.verdict_counts) <= {"WA", "RE", "TLE", "CE"}
