"""The judge's verdict of one execution (``/v1/execute``), from its steps."""

from __future__ import annotations

import pytest
from codegym_sandbox.executor import Execution, StepResult
from codegym_sandbox.judging.judge import execution_verdict
from codegym_sandbox.verdicts import Verdict


def _step(verdict: Verdict) -> StepResult:
    return StepResult(verdict, 0 if verdict is Verdict.AC else 1, None, 0.1, 0.1, 1000, b"", b"")


@pytest.mark.parametrize(
    ("compiled", "run", "verdict"),
    [
        (None, Verdict.AC, Verdict.AC),
        (None, Verdict.TLE, Verdict.TLE),
        (Verdict.AC, Verdict.RE, Verdict.RE),  # it compiled: the run decides
        (Verdict.AC, Verdict.AC, Verdict.AC),
        (Verdict.CE, None, Verdict.CE),  # it did not compile, and never ran
        (Verdict.TLE, None, Verdict.TLE),
        (None, Verdict.SE, Verdict.SE),
    ],
)
def test_an_execution_has_its_runs_verdict_or_its_failed_compiles(
    compiled: Verdict | None, run: Verdict | None, verdict: Verdict
) -> None:
    ex = Execution(_step(compiled) if compiled else None, _step(run) if run else None)
    assert execution_verdict(ex) is verdict


def test_an_execution_without_steps_has_no_verdict() -> None:
    with pytest.raises(ValueError, match="compile step"):
        execution_verdict(Execution(None, None))
