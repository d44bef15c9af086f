"""The test of tests, for real: planted answers from a scripted model, judged in the session's sandbox.

Wrong tests, weak tests, duplicates and trivial problems are rejected, each for its reason; the good problem is
kept, and the task file loads with the evaluator's loader and its reference gets AC through its scoring path.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_data.synthesize import REASONS, SynthesisRun, SynthesizeConfig, synthesize
from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.model_client import ModelClient
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import load_tasks
from synth_support import GOOD, PLANTED, scripted_model


def run_pipeline(answers: list[str | None], sandbox_url: str, **settings: Any) -> SynthesisRun:
    config = SynthesizeConfig(count=len(answers), sandbox_url=[sandbox_url], **settings)
    app = scripted_model(answers, seed=config.seed, min_tests=config.min_tests)

    async def go() -> SynthesisRun:
        transport = httpx.ASGITransport(app=app)
        async with (
            ModelClient("http://model/v1", "scripted", transport=transport, concurrency=3, retries=0) as model,
            Scorer(sandbox_url, concurrency=4, timeout_per_test=config.timeout_per_test) as scorer,
        ):
            return await synthesize(config, model, scorer)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def planted(sandbox_url: str) -> SynthesisRun:
    return run_pipeline([text for text, _ in PLANTED], sandbox_url)


def test_every_planted_answer_gets_its_verdict(planted: SynthesisRun) -> None:
    got = [(o.index, o.reason) for o in planted.outcomes]
    details = [(o.reason, o.detail) for o in planted.outcomes]
    assert got == [(i, reason) for i, (_, reason) in enumerate(PLANTED)], details
    assert all(o.reason in REASONS for o in planted.rejected)


def test_wrong_tests_are_rejected_because_the_reference_fails_them(planted: SynthesisRun) -> None:
    wrong = planted.outcomes[1]
    assert wrong.reason == "reference_fails"
    assert wrong.detail == "WA, 2/3 tests passed; first failing test: 'assert square_sum([1, 2]) == 6'"
    assert wrong.mutation_score is None  # its mutants were never judged


def test_weak_tests_are_rejected_by_their_mutation_score(planted: SynthesisRun) -> None:
    weak = planted.outcomes[2]
    assert weak.reason == "weak_tests"
    assert weak.mutants_judged == 10 and weak.mutation_score is not None and weak.mutation_score < 0.8
    # a boundary bug and a sign bug, which any test with a real expected value would catch, survive
    assert "flip_comparison@4" in weak.survivors and "swap_arithmetic@5" in weak.survivors
    assert weak.detail.startswith(f"{weak.mutants_killed}/10 killed; survivors: ")


def test_the_good_problem_kills_every_mutant(planted: SynthesisRun) -> None:
    good = planted.outcomes[0]
    assert good.reason is None and good.mutation_score == 1.0 and good.mutants_judged == 10 and not good.survivors
    assert good.task is not None and planted.outcomes[4].detail == f"as {good.task.task_id}"  # the duplicate names it


def test_the_report_counts_every_candidate_once(planted: SynthesisRun) -> None:
    report = planted.report.to_dict()
    assert report["candidates"] == len(PLANTED) and report["kept"] == 1 and report["model"] == "scripted"
    expected = {reason: 1 for _, reason in PLANTED if reason is not None}
    assert report["rejected"] == expected
    assert report["mutation_score"]["kept"] == [1.0]
    judged = [o for o in planted.outcomes if o.mutation_score is not None]
    assert sorted(report["mutation_score"]["judged"]) == sorted(o.mutation_score for o in judged)
    operators = report["operators"]
    assert sum(s["mutants"] for s in operators.values()) == sum(o.mutants_judged for o in judged)
    markdown = planted.report.markdown()
    assert "| kept | 1 | 9% |" in markdown and "| weak_tests | 1 | 9% |" in markdown


def test_the_task_file_loads_and_its_reference_passes_through_the_evaluator(
    planted: SynthesisRun, tmp_path: Path, sandbox_url: str
) -> None:
    paths = planted.write(tmp_path)
    tasks = load_tasks("jsonl", path=paths["tasks.jsonl"])
    assert [t.task_id for t in tasks] == [t.task_id for t in planted.tasks] and len(tasks) == 1
    (task,) = tasks
    assert task.task_id.startswith("synth/count_vowels-") and task.kind == "assert" and len(task.tests) == 5
    assert task.entry_point == "count_vowels" and "`count_vowels(text)`" in task.prompt
    assert task.metadata["synthesized"]["mutation_score"] == 1.0
    # the reference as a model's fenced answer: extraction, sanitising and judging as for any completion
    completion = f"Here it is:\n```python\n{task.metadata['canonical_solution']}\n```\n"

    async def judge() -> dict[int, float]:
        async with Scorer(sandbox_url) as scorer:
            return (await evaluate_completions(tasks, {task.task_id: [completion]}, scorer)).pass_at_k

    assert asyncio.run(judge()) == {1: 1.0}
    rejected = [json.loads(line) for line in paths["rejected.jsonl"].read_text().splitlines()]
    assert [r["reason"] for r in rejected] == [reason for _, reason in PLANTED if reason is not None]
    assert rejected[0]["answer"] == PLANTED[1][0] and rejected[0]["entry_point"] == "square_sum"
    report = json.loads(paths["report.json"].read_text())
    assert report["kept"] == 1 and "weak_tests" in paths["report.md"].read_text()


def test_a_refused_request_is_counted_and_the_rest_go_on(sandbox_url: str) -> None:
    run = run_pipeline([None, GOOD], sandbox_url)
    assert [o.reason for o in run.outcomes] == ["model_error", None]
    assert "refused the request: HTTP 400" in run.outcomes[0].detail


def test_thresholds_come_from_the_settings(sandbox_url: str) -> None:
    weak = PLANTED[2][0]
    # with no mutation score asked for, weak tests are kept; with 6 tests asked for, the good one is not
    run = run_pipeline([weak, GOOD], sandbox_url, min_mutation_score=0.0, min_tests=6)
    assert [o.reason for o in run.outcomes] == ["too_few_tests", "too_few_tests"]
    run = run_pipeline([weak], sandbox_url, min_mutation_score=0.0, mutants=4)
    assert run.outcomes[0].reason is None and run.outcomes[0].mutants_judged == 4
