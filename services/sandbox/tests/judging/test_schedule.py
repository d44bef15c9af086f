"""How ``/v1/evaluate`` is scheduled, with an executor that records what it is asked to run (no sandbox)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from codegym_sandbox import languages
from codegym_sandbox.agent.assert_outcome import WRONG_ANSWER
from codegym_sandbox.backends.base import RunPolicy
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.config import Limits, Settings
from codegym_sandbox.executor import RunLimits, StepResult
from codegym_sandbox.judging import off_loop
from codegym_sandbox.judging.schedule import judge_requests
from codegym_sandbox.models import EvaluateRequest, ProgramOut
from codegym_sandbox.verdicts import RunEnd, Verdict
from sandbox_support import while_ticking


class _Backend:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.memory = MemoryBudget(1024)

    def status(self) -> dict[str, Any]:
        return {"workers": self.workers}


class _Executor:
    """Runs nothing: a stdin test's program echoes its input; an assert run fails when its stdin says "bad"."""

    def __init__(self, workers: int, per_exchange: int = 1000) -> None:
        self.backend = _Backend(workers)
        # Outputs of at most ``per_exchange`` runs in one exchange (see ``schedule.per_exchange``).
        self.settings = Settings(exchange_output_bytes=per_exchange << 20, limits=Limits(output_bytes=1 << 20))
        self.batches: list[list[bytes | None]] = []  # the stdins of each run_tests call, in call order
        self.policies: list[RunPolicy] = []  # the policy of each build and run_tests call

    def language(self, name: str) -> languages.Language:
        lang = languages.lookup(name)
        assert lang is not None
        return lang

    def run_limits(self, timeout_s: float | None, memory_mb: int | None) -> RunLimits:
        return RunLimits(timeout_s or 1.0, memory_mb or 256)

    def compile_limits(self, timeout_s: float | None) -> RunLimits:
        return RunLimits(timeout_s or 1.0, 256)

    async def build(
        self, lang: languages.Language, code: str, files: dict[str, bytes], limits: RunLimits, policy: RunPolicy
    ) -> Any:
        self.policies.append(policy)
        return None, {lang.source: (code.encode(), 0o644)}

    @staticmethod
    def files_digest(files: Any) -> str:
        return "files"

    async def run_tests(
        self,
        lang: languages.Language,
        sources: Any,
        stdins: list[bytes | None],
        limits: RunLimits,
        policy: RunPolicy,
        shared: bool = False,
        digests: list[str] | None = None,
        files_digest: str = "",
        turns: Any = None,
    ) -> list[StepResult]:
        self.batches.append(stdins)
        self.policies.append(policy)
        await asyncio.sleep(0)
        if shared:  # the assert runner: its exit status is the verdict
            return [_step(WRONG_ANSWER if b"bad" in (s or b"") else 0, b"") for s in stdins]
        return [_step(0, s or b"") for s in stdins]


def _step(exit_code: int, stdout: bytes) -> StepResult:
    end = RunEnd.EXITED if exit_code == 0 else RunEnd.FAILED
    return StepResult(end, exit_code, None, 0.01, 0.01, 1000, stdout, b"")


def _judge(executor: _Executor, *reqs: EvaluateRequest, policy: RunPolicy = RunPolicy()) -> list[list[ProgramOut]]:
    return asyncio.run(judge_requests(executor, list(reqs), policy))  # type: ignore[arg-type]


def _stdin_request(n: int, wrong: int | None, early_stop: bool, programs: int = 1) -> EvaluateRequest:
    tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i if i != wrong else 'x'}\n"} for i in range(n)]
    return EvaluateRequest.model_validate(
        {"language": "python", "programs": ["print(input())"] * programs, "tests": tests, "early_stop": early_stop}
    )


@pytest.mark.parametrize(
    ("wrong", "sizes", "judged"),
    [
        (0, [1], 1),  # the first test fails: one run
        (1, [1, 2], 2),  # within the second part: that part runs whole, the verdicts stop at the failure
        (5, [1, 2, 4], 6),
        (None, [1, 2, 4, 3], 10),  # all pass: 4 exchanges for 10 tests
    ],
)
def test_early_stop_runs_parts_of_1_2_4_tests_in_order(wrong: int | None, sizes: list[int], judged: int) -> None:
    executor = _Executor(workers=4)
    ((out,),) = _judge(executor, _stdin_request(10, wrong, early_stop=True))
    assert [len(b) for b in executor.batches] == sizes
    assert [s for b in executor.batches for s in b] == [f"{i}\n".encode() for i in range(sum(sizes))]
    assert len(out.tests) == judged and out.stopped_early is (judged < 10)
    assert out.verdict is (Verdict.AC if wrong is None else Verdict.WA)
    assert out.passed == (10 if wrong is None else wrong) and out.total == 10


@pytest.mark.parametrize(
    ("workers", "programs", "sizes"),
    [(1, 1, [6]), (2, 1, [3, 3]), (4, 1, [2, 2, 2]), (4, 2, [3, 3, 3, 3]), (2, 4, [6, 6, 6, 6])],
)
def test_a_programs_stdin_tests_are_split_only_when_workers_would_idle(
    workers: int, programs: int, sizes: list[int]
) -> None:
    executor = _Executor(workers)
    outs = _judge(executor, _stdin_request(6, None, early_stop=False, programs=programs))[0]
    assert sorted(len(b) for b in executor.batches) == sorted(sizes)
    assert all(o.verdict is Verdict.AC and o.passed == 6 and not o.stopped_early for o in outs)


def _assert_request(programs: list[str], tests: list[dict[str, str]], early_stop: bool) -> EvaluateRequest:
    return EvaluateRequest.model_validate(
        {"language": "python", "programs": programs, "tests": tests, "early_stop": early_stop}
    )


@pytest.mark.parametrize("early_stop", [True, False])
def test_assert_tests_go_round_by_round_and_early_stop_drops_a_failed_program(early_stop: bool) -> None:
    # Each test names its round; "bad" in a run's stdin (the program's code or the test's) fails that run.
    tests = [{"assert_code": "'r0'"}, {"assert_code": "'r1' and bad"}, {"assert_code": "'r2'"}]
    bad_tests = [{"assert_code": "'r0'"}, {"assert_code": "'r1'"}]
    good = _assert_request(["ok = 1", "ok = 2"], tests, early_stop)
    bad = _assert_request(["bad = 1"], bad_tests, early_stop)
    executor = _Executor(workers=1)
    judged_good, judged_bad = _judge(executor, good, bad)
    rounds = [int(s.split(b"'r")[-1][:1]) for b in executor.batches for s in b if s is not None]
    assert rounds == sorted(rounds)  # every run of a round before any of the next
    # Round 0: the three programs; round 1: the good ones (and the bad one without early stop); round 2: the
    # good ones without early stop (they failed round 1).
    assert [rounds.count(r) for r in range(3)] == ([3, 2, 0] if early_stop else [3, 3, 2])
    for out in judged_good:
        assert out.verdict is Verdict.WA and out.passed == (1 if early_stop else 2) and out.total == 3
        assert [t.verdict for t in out.tests] == [Verdict.AC, Verdict.WA] + ([] if early_stop else [Verdict.AC])
        assert out.stopped_early is early_stop
    (out,) = judged_bad
    assert out.verdict is Verdict.WA and [t.verdict for t in out.tests] == [Verdict.WA] * (1 if early_stop else 2)


@pytest.mark.parametrize(
    "policy",
    [RunPolicy(), RunPolicy(cache=False), RunPolicy(cache=False, queue_wait_s=2.5, admitted=True)],
)
def test_every_build_and_run_of_a_request_gets_the_policy_it_was_judged_with(policy: RunPolicy) -> None:
    executor = _Executor(workers=4)
    stdin = _stdin_request(5, 2, early_stop=True, programs=2)
    asserts = EvaluateRequest.model_validate(
        {"language": "python", "programs": ["x = 1"], "tests": [{"assert_code": "assert True"}] * 3}
    )
    _judge(executor, stdin, asserts, policy=policy)
    # Builds of the stdin programs, and runs of both kinds: none goes without the request's policy.
    assert len(executor.policies) > len(executor.batches) >= 3
    assert set(executor.policies) == {policy}


@pytest.mark.parametrize(("early_stop", "sizes"), [(False, [2, 2, 2, 1]), (True, [1, 2, 2, 2])])
def test_a_programs_tests_go_in_exchanges_no_larger_than_their_outputs_allow(
    early_stop: bool, sizes: list[int]
) -> None:
    """Every test may print the output limit: an exchange brings back at most ``per_exchange`` tests' outputs,
    and the next goes only when the last is judged (one program, one worker: one exchange at a time)."""
    executor = _Executor(workers=1, per_exchange=2)
    ((out,),) = _judge(executor, _stdin_request(7, None, early_stop=early_stop))
    assert [len(b) for b in executor.batches] == sizes
    assert [s for b in executor.batches for s in b] == [f"{i}\n".encode() for i in range(7)]
    assert out.verdict is Verdict.AC and out.passed == 7 and len(out.tests) == 7


def test_assert_runs_go_in_exchanges_no_larger_than_their_outputs_allow() -> None:
    tests = [{"assert_code": "'r0'"}, {"assert_code": "'r1' and bad"}]
    executor = _Executor(workers=1, per_exchange=1)  # parts of 2 runs otherwise (a quarter of a worker's share)
    outs = _judge(executor, _assert_request([f"ok = {i}" for i in range(5)], tests, early_stop=False))[0]
    assert [len(b) for b in executor.batches] == [1] * 10
    assert all([t.verdict for t in o.tests] == [Verdict.AC, Verdict.WA] for o in outs)


def test_a_tests_stdin_is_encoded_once_for_every_program() -> None:
    """The same bytes for each program: a request's stdin is held once, whatever its programs."""
    executor = _Executor(workers=1)
    tests = [{"stdin": "x" * 1000, "expected_stdout": "x" * 1000}]
    request = EvaluateRequest.model_validate({"language": "python", "programs": ["a", "b", "c"], "tests": tests})
    _judge(executor, request)
    stdins = [b[0] for b in executor.batches]
    assert len(stdins) == 3 and all(s is stdins[0] for s in stdins)


@pytest.mark.parametrize("wrong", [False, True])
def test_large_comparisons_leave_the_event_loop_free(wrong: bool) -> None:
    """Outputs compared as numbers token by token: 8 MiB of ``1.0`` against ``1.00`` took the loop seconds per
    program, every client's requests waiting. Judged elsewhere, with the same verdicts."""
    executor = _Executor(workers=1)
    n = 500_000
    printed = "1.0\n" * n + ("2.5\n" if wrong else "1.0\n")  # each program prints its stdin
    tests = [{"stdin": printed, "expected_stdout": "1.00\n" * (n + 1)}]
    body = {"language": "python", "programs": ["a", "b"], "tests": tests, "comparison": "float"}
    request = EvaluateRequest.model_validate(body)

    (outs,), gap = asyncio.run(while_ticking(judge_requests(executor, [request], RunPolicy())))  # type: ignore[arg-type]
    assert [o.verdict for o in outs] == [Verdict.WA if wrong else Verdict.AC] * 2
    assert gap < 0.3, f"the loop was held {gap:.2f} s"


def test_an_output_waiting_for_its_comparison_takes_a_share_of_the_memory_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its run's share ended with the run: outputs waiting for the pool hold the next runs back, not pile up."""
    executor = _Executor(workers=1)
    executor.backend.memory = MemoryBudget(1)
    released = asyncio.Event()

    async def slow(*args: Any) -> bool:
        await released.wait()
        return True

    monkeypatch.setattr(off_loop, "_in_pool", slow)
    tests = [{"stdin": "1 " * 4096, "expected_stdout": "1.0 " * 4096}]
    body = {"language": "python", "programs": ["a", "b", "c"], "tests": tests, "comparison": "float"}
    request = EvaluateRequest.model_validate(body)

    async def judged() -> tuple[tuple[int, int], list[list[ProgramOut]]]:
        task = asyncio.create_task(judge_requests(executor, [request], RunPolicy()))  # type: ignore[arg-type]
        for _ in range(50):
            await asyncio.sleep(0)
        held = executor.backend.memory.held_mb, executor.backend.memory.waiting
        released.set()
        return held, await task

    held, (outs,) = asyncio.run(judged())
    assert held == (1, 2)  # one output in the pool holds the MiB, the two others wait for it
    assert [o.verdict for o in outs] == [Verdict.AC] * 3 and executor.backend.memory.held_mb == 0
