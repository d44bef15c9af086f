"""Asking again for runs that came back SE: one policy, and every route of the evaluator asks by it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from codegym_evaluator.ask_again import AskAgain
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task
from codegym_evaluator.trl_reward import AsyncCodeReward
from codegym_sandbox.client import RetryPolicy
from codegym_sandbox.verdicts import Verdict

pytestmark = pytest.mark.anyio

SANDBOX = "http://sandbox"
ADD = Task("add", "add", "stdio", [{"stdin": "1 2", "expected_stdout": "3"}])


@dataclass
class Answer:
    verdict: Verdict


def test_only_se_is_asked_again_retries_times_after_the_backoff() -> None:
    policy = AskAgain(RetryPolicy(retries=2, backoff_s=1.0))
    assert policy.again(0, [Answer(Verdict.AC), Answer(Verdict.WA), Answer(Verdict.TLE)]) is None
    assert 0.75 <= (policy.again(0, [Answer(Verdict.AC), Answer(Verdict.SE)]) or 0) <= 1.25
    assert 1.5 <= (policy.again(1, [Answer(Verdict.SE)]) or 0) <= 2.5
    assert policy.again(2, [Answer(Verdict.SE)]) is None  # the retries are spent: SE stands
    assert AskAgain(RetryPolicy(retries=0)).again(0, [Answer(Verdict.SE)]) is None


@dataclass
class WithTests:
    verdict: Verdict
    tests: list[Answer]


def test_a_program_with_an_se_test_is_asked_again() -> None:
    """A test the sandbox failed after a wrong one leaves the verdict WA: the program is unjudged all the same."""
    policy = AskAgain(RetryPolicy(retries=2, backoff_s=1.0))
    after_wrong = WithTests(Verdict.WA, [Answer(Verdict.AC), Answer(Verdict.WA), Answer(Verdict.SE)])
    assert policy.again(0, [after_wrong]) is not None
    assert policy.again(0, [WithTests(Verdict.WA, [Answer(Verdict.AC), Answer(Verdict.WA)])]) is None


class Flaky:
    """A sandbox whose every run comes back SE ``failures`` times before it is judged (AC); it counts the runs."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.runs: Counter[str] = Counter()  # a program's runs

    def _verdict(self, program: str) -> str:
        self.runs[program] += 1
        return "SE" if self.runs[program] <= self.failures else "AC"

    def _program(self, program: str, tests: int) -> dict[str, Any]:
        verdict = self._verdict(program)
        test = {"verdict": verdict, "wall_s": 0.0, "cpu_s": None, "stdout": "", "stderr": "worker died"}
        passed = tests if verdict == "AC" else 0
        return {
            "verdict": verdict,
            "passed": passed,
            "total": tests,
            "stopped_early": False,
            "compile": None,
            "tests": [test] * tests,
        }

    def _evaluate(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"results": [self._program(p, len(body["tests"])) for p in body["programs"]], "wall_s": 0.0}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/v1/evaluate":
            return httpx.Response(200, json=self._evaluate(body))
        if request.url.path == "/v1/evaluate/batch":
            return httpx.Response(200, json={"responses": [self._evaluate(b) for b in body["requests"]], "wall_s": 0})
        if request.url.path == "/v1/execute":
            verdict = self._verdict(body["code"])
            step = {
                "verdict": verdict,
                "exit_code": 0,
                "signal": None,
                "wall_s": 0.0,
                "cpu_s": None,
                "max_rss_kb": None,
                "stdout": "",
                "stderr": "",
                "output_truncated": False,
                "cached": False,
            }
            return httpx.Response(200, json={"verdict": verdict, "compile": None, "run": step})
        return httpx.Response(404)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The attempts after which a route consulted ``AskAgain.again``: a route with a policy of its own adds none."""
    seen: list[int] = []
    again = AskAgain.again

    def spy(self: AskAgain, attempt: int, answers: Any) -> float | None:
        seen.append(attempt)
        return again(self, attempt, answers)

    monkeypatch.setattr(AskAgain, "again", spy)
    yield seen


@pytest.mark.parametrize(("failures", "runs", "verdict"), [(0, 1, "AC"), (1, 2, "AC"), (2, 3, "AC"), (3, 3, "SE")])
async def test_a_scorers_groups_ask_again_by_the_policy(
    asked: list[int], failures: int, runs: int, verdict: str
) -> None:
    sandbox = Flaky(failures)
    async with Scorer(SANDBOX, transport=httpx.MockTransport(sandbox), retries=2, backoff_s=0.001) as scorer:
        scores = await scorer.score_group(ADD, ["print(3)", "print(4)", "print(5)"], extract=False)
    assert [s.verdict for s in scores] == [verdict] * 3
    assert sandbox.runs == {"print(3)": runs, "print(4)": runs, "print(5)": runs}  # once per attempt each
    assert asked == list(range(runs))


@pytest.mark.parametrize(("failures", "runs", "verdict"), [(0, 1, "AC"), (1, 2, "AC"), (3, 3, "SE")])
async def test_a_scorers_single_runs_ask_again_by_the_policy(
    asked: list[int], failures: int, runs: int, verdict: str
) -> None:
    sandbox = Flaky(failures)
    async with Scorer(SANDBOX, transport=httpx.MockTransport(sandbox), retries=2, backoff_s=0.001) as scorer:
        outputs = await scorer.execute_many(["print(1)"])
    assert [o.verdict for o in outputs] == [verdict] and sandbox.runs == {"print(1)": runs}
    assert asked == list(range(runs))


@pytest.mark.parametrize(("failures", "reward"), [(1, 1.0), (2, None)])
async def test_code_reward_asks_again_by_the_policy(asked: list[int], failures: int, reward: float | None) -> None:
    sandbox = Flaky(failures)
    code_reward = AsyncCodeReward(SANDBOX, retries=1, transport=httpx.MockTransport(sandbox))
    columns = {"input_output": [{"inputs": ["1 2\n"], "outputs": ["3\n"]}]}
    assert await code_reward(completions=["print(3)"], **columns) == [reward]
    assert sum(sandbox.runs.values()) == 2 and asked == [0, 1]


async def test_an_unreachable_sandbox_is_not_asked_again_here(asked: list[int]) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with Scorer(SANDBOX, transport=httpx.MockTransport(down), retries=2, backoff_s=0.001) as scorer:
        (score,) = await scorer.score_group(ADD, ["print(3)"], extract=False)
        (output,) = await scorer.execute_many(["print(3)"])
    assert score.sandbox_error and output.sandbox_error and "sandbox unavailable" in (score.error or "")
    assert asked == []  # the client retried the request; no run came back to ask again for
