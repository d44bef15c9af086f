"""Python test harnesses for function-call and assert tests.

Both run with :data:`ASSERT_MAIN` (``agent/assert_runner.py``): the tests run in a process of their own
that the program cannot reach, calling the program's functions in another process with plain data, and
the verdict is that process's exit status (see the runner). The program runs as a module that is not
``__main__``, with ``/dev/null`` as its stdin; what it prints is shown, never judged. A function-call test
is a call there (``agent/call_test.py``): the checker compares the returned value with the expected one,
by the request's ``call_comparison`` and tolerances, so the expected value never reaches the program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agent import call_test, program_names
from ..agent.assert_outcome import WRONG_ANSWER

# ASSERT_MAIN: one file for every program and every test: each run gets its program and tests on stdin, so
# that the sandbox runs them all in one test series (one checker for all of them, see the runner), of any
# task. The runner itself is part of the agent, loaded in the box before any fork.
from ..agent.assert_runner import ASSERT_MAIN as ASSERT_MAIN
from ..agent.assert_stdin import assert_stdin as assert_stdin  # the program's length, the program, the tests
from ..models import CallComparison

if TYPE_CHECKING:
    from ..models import EvaluateRequest, Test


# The checker's rule of each call comparison of the wire.
_RULES: dict[CallComparison, call_test.Rule] = {
    CallComparison.JSON: "json",
    CallComparison.PYTHON: "python",
    CallComparison.APPS: "apps",
}


def call_stdin(
    code: str,
    function: str,
    args: list[object],
    kwargs: dict[str, object] | None,
    expected: object,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-6,
    rule: call_test.Rule = "json",
) -> bytes:
    """What :data:`ASSERT_MAIN` reads on stdin to judge ``code``'s ``function(*args, **kwargs)`` against
    ``expected`` by ``rule`` (see ``compare.values_match``)."""
    if not function.isidentifier():
        raise ValueError(f"function {function!r} is not a Python identifier")
    return assert_stdin(code, call_test.text(function, args, kwargs or {}, expected, rel_tol, abs_tol, rule))


def runner_stdin(req: EvaluateRequest, code: str, test: Test) -> bytes:
    """The runner's stdin for a call or assert ``test`` of ``req``."""
    if test.assert_code is not None:
        # The task's entry point is the program's for its assert tests, even where a builtin has its name.
        declared = f"{program_names.DECLARED}{req.function}\n" if req.function else ""
        return assert_stdin(code, declared + test.assert_code)
    if test.call is None or req.function is None:
        raise ValueError("only call and assert tests run with the runner")
    rule = _RULES[req.call_comparison]
    return call_stdin(code, req.function, test.call, test.kwargs, test.expected, req.rel_tol, req.abs_tol, rule)


def assert_outcome(exit_code: int | None) -> bool | None:
    """What a runner's run that ended by itself says: passed (True), failed its tests (False), or neither
    (None: the program's own failure, whose verdict is the run's)."""
    if exit_code == 0:
        return True
    return False if exit_code == WRONG_ANSWER else None
