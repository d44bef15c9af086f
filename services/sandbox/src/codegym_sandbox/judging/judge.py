"""The judge: every verdict of a test and of a program is decided here, and only here.

A run's end (limits, exit status: ``verdicts.run_end``, which the executor gives every step) is no verdict: a
run that ended by itself (``RunEnd.EXITED``) passes or fails its test as the test says: a stdin test compares
outputs, on this side (a large comparison in a process of its own: ``off_loop``); a call test and an assert
test are read from the runner's exit status (see ``assert_runner``), which the program cannot set: the runner's
checker compares a returned value with the expected one (``compare.values_match``), never what the program
printed. Clients of the API, the
evaluator among them, take these verdicts as they are. A run that ended otherwise (a limit, a crash, a sandbox
failure) has that end's verdict (``RunEnd.verdict``), whatever its test.
"""

from __future__ import annotations

from ..executor import Execution, StepResult
from ..models import EvaluateRequest, ProgramOut, Test, TestOut
from ..verdicts import RunEnd, Verdict
from . import harness
from .off_loop import Comparisons
from .wire import step_out, text

SHOWN_BYTES = 1024  # of a test's stdout (its start) and stderr (its end) in an answer
# Of every test's shown output together, in one request's answer: a request of many tests shows less of each, so
# that what the server holds and sends for an answer does not grow with its count of runs (2**18 runs at a KiB of
# each stream held 0.6 GB before the answer, some 3 GB of JSON: a control character is six bytes of it).
ANSWER_SHOWN_BYTES = 16 << 20


def shown_bytes(runs: int) -> int:
    """How much of each of a test's streams an answer of ``runs`` tests shows."""
    return max(min(SHOWN_BYTES, ANSWER_SHOWN_BYTES // (2 * max(runs, 1))), 16)


def share_answer(reqs: list[EvaluateRequest]) -> None:
    """Set each request's share of its answer's shown output: the requests of a batch share one answer."""
    shown = shown_bytes(sum(len(r.programs) * len(r.tests) for r in reqs))
    for req in reqs:
        req._shown_bytes = shown


def execution_verdict(ex: Execution) -> Verdict:
    """The verdict of one program run once (``/v1/execute``): its run's, or its compile step's when it did
    not compile (and so never ran)."""
    final = ex.run or ex.compile
    if final is None:
        raise ValueError("an execution has a compile step, a run, or both")
    return final.end.verdict


async def test_verdict(req: EvaluateRequest, test: Test, step: StepResult, comparisons: Comparisons) -> Verdict:
    """The verdict of one test, from its run; a stdin test's outputs compared among ``comparisons`` (its
    request's: see ``off_loop``)."""
    if (test.assert_code is not None or test.call is not None) and step.end in (RunEnd.EXITED, RunEnd.FAILED):
        # A failed assertion (or a returned value that is not the expected one) is a wrong answer, as every
        # reference harness counts it; an exception of the program's own stays a runtime error.
        outcome = harness.assert_outcome(step.exit_code) if step.signal is None else None
        if outcome is not None:
            return Verdict.AC if outcome else Verdict.WA
        return Verdict.RE if step.end is RunEnd.FAILED else Verdict.WA
    if step.end is not RunEnd.EXITED:
        return step.end.verdict
    assert test.expected_stdout is not None
    actual, expected = text(step.stdout), test.expected_stdout
    same = await comparisons.outputs_match(actual, expected, req.comparison, req.rel_tol, req.abs_tol)
    return Verdict.AC if same else Verdict.WA


async def test_out(req: EvaluateRequest, test: Test, step: StepResult, comparisons: Comparisons) -> TestOut:
    return TestOut(
        verdict=await test_verdict(req, test, step, comparisons),
        wall_s=step.wall_s,
        cpu_s=step.cpu_s,
        stdout=text(step.stdout[: req._shown_bytes]),
        stderr=text(step.stderr[-req._shown_bytes :]),
    )


def program_out(req: EvaluateRequest, tests: list[TestOut], compiled: StepResult | None = None) -> ProgramOut:
    """A program's verdict: its first test that is not AC (in the tests' order), else AC."""
    return ProgramOut(
        verdict=next((t.verdict for t in tests if t.verdict is not Verdict.AC), Verdict.AC),
        passed=sum(t.verdict is Verdict.AC for t in tests),
        total=len(req.tests),
        stopped_early=len(tests) < len(req.tests),
        compile=step_out(compiled) if compiled else None,
        tests=tests,
    )


def compile_failed(req: EvaluateRequest, compiled: StepResult) -> ProgramOut:
    """A program that did not compile: its compile step's verdict, for the program and its one test line."""
    failed = TestOut(
        verdict=compiled.end.verdict, wall_s=0.0, cpu_s=None, stdout="", stderr=text(compiled.stderr[-SHOWN_BYTES:])
    )
    return ProgramOut(
        verdict=compiled.end.verdict,
        passed=0,
        total=len(req.tests),
        stopped_early=False,
        compile=step_out(compiled),
        tests=[failed],
    )


def sandbox_error(req: EvaluateRequest, message: str) -> ProgramOut:
    """SE for a program the server cannot judge at all (never the program's fault)."""
    se = TestOut(verdict=Verdict.SE, wall_s=0.0, cpu_s=None, stdout="", stderr=message)
    return ProgramOut(verdict=Verdict.SE, passed=0, total=len(req.tests), stopped_early=False, compile=None, tests=[se])
