"""The judge's verdict of one execution (``/v1/execute``), from its steps."""

from __future__ import annotations

import asyncio

import pytest
from codegym_sandbox import models
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.executor import Execution, StepResult
from codegym_sandbox.judging import judge
from codegym_sandbox.judging.judge import execution_verdict
from codegym_sandbox.judging.off_loop import Comparisons
from codegym_sandbox.verdicts import RunEnd, Verdict


def _step(end: RunEnd) -> StepResult:
    return StepResult(end, 0 if end is RunEnd.EXITED else 1, None, 0.1, 0.1, 1000, b"", b"")


@pytest.mark.parametrize(
    ("compiled", "run", "verdict"),
    [
        (None, RunEnd.EXITED, Verdict.AC),
        (None, RunEnd.TIME_LIMIT, Verdict.TLE),
        (RunEnd.EXITED, RunEnd.FAILED, Verdict.RE),  # it compiled: the run decides
        (RunEnd.EXITED, RunEnd.EXITED, Verdict.AC),
        (RunEnd.COMPILE_ERROR, None, Verdict.CE),  # it did not compile, and never ran
        (RunEnd.TIME_LIMIT, None, Verdict.TLE),
        (None, RunEnd.SANDBOX_ERROR, Verdict.SE),
    ],
)
def test_an_execution_has_its_runs_verdict_or_its_failed_compiles(
    compiled: RunEnd | None, run: RunEnd | None, verdict: Verdict
) -> None:
    ex = Execution(_step(compiled) if compiled else None, _step(run) if run else None)
    assert execution_verdict(ex) is verdict


def test_an_execution_without_steps_has_no_verdict() -> None:
    with pytest.raises(ValueError, match="compile step"):
        execution_verdict(Execution(None, None))


@pytest.mark.parametrize(
    ("end", "stdout", "verdict"),
    [
        (RunEnd.EXITED, b"3\n", Verdict.AC),
        (RunEnd.EXITED, b"4\n", Verdict.WA),  # it exited 0: the test, not the run, says whether it passed
        (RunEnd.FAILED, b"3\n", Verdict.RE),  # the right output, but it crashed
        (RunEnd.TIME_LIMIT, b"3\n", Verdict.TLE),
        (RunEnd.SANDBOX_ERROR, b"", Verdict.SE),
    ],
)
def test_a_stdin_tests_verdict_is_the_judges_from_the_runs_end(end: RunEnd, stdout: bytes, verdict: Verdict) -> None:
    req = models.EvaluateRequest(language="python", programs=["x"], tests=[models.Test(stdin="", expected_stdout="3")])
    step = StepResult(end, 0 if end is RunEnd.EXITED else 1, None, 0.1, 0.1, 1000, stdout, b"")
    assert asyncio.run(judge.test_verdict(req, req.tests[0], step, Comparisons(MemoryBudget(64)))) is verdict
