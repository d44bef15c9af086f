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
    return assert_stdin(code, _runner_test(req, test))


def _runner_test(req: EvaluateRequest, test: Test) -> str:
    """What follows the program in the runner's stdin for a call or assert ``test`` of ``req``."""
    if test.assert_code is not None:
        # The task's entry point is the program's for its assert tests, even where a builtin has its name.
        declared = f"{program_names.DECLARED}{req.function}\n" if req.function else ""
        return declared + test.assert_code
    if test.call is None or req.function is None:
        raise ValueError("only call and assert tests run with the runner")
    if not req.function.isidentifier():
        raise ValueError(f"function {req.function!r} is not a Python identifier")
    rule = _RULES[req.call_comparison]
    return call_test.text(req.function, test.call, test.kwargs or {}, test.expected, req.rel_tol, req.abs_tol, rule)


def expanded_bytes(req: EvaluateRequest) -> int:
    """The bytes of the stdins the largest round of ``req``'s call and assert tests makes: each program, in
    UTF-8 as :func:`assert_stdin` writes it, with the largest test (a character past U+FFFF is four bytes of it,
    one of a str's length)."""
    tests = [t for t in req.tests if t.assert_code is not None or t.call is not None]
    if not tests:
        return 0
    largest = max(utf8_bytes(_runner_test(req, t)) for t in tests)
    return sum(len(f"{n}\n") + n + largest for n in map(utf8_bytes, req.programs))


def utf8_bytes(text: str) -> int:
    """The length of ``text`` in UTF-8 (lone surrogates as ``surrogatepass`` writes them); no copy for ASCII."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def assert_outcome(exit_code: int | None) -> bool | None:
    """What a runner's run that ended by itself says: passed (True), failed its tests (False), or neither
    (None: the program's own failure, whose verdict is the run's)."""
    if exit_code == 0:
        return True
    return False if exit_code == WRONG_ANSWER else None
