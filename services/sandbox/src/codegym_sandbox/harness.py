"""Python test harnesses for function-call and assert tests.

Function-call tests: the harness calls the function and prints only its JSON result; the expected value
stays on the server, which compares. Assert tests run with :data:`ASSERT_RUNNER` (``agent/assert_runner.py``):
the tests run in a process of their own that the program cannot reach, calling the program's functions in
another process with plain data, and the verdict is that process's exit status (see the runner). Results of
a call must be plain data (no object can compare equal to everything).
"""

from __future__ import annotations

import json

from .agent.assert_runner import RUNNER, WRONG_ANSWER

_CALL = """
{code}

def __codegym_call():
    import json as _json, sys as _sys, io as _io
    _out = _sys.stdout
    _sys.stdout = _io.StringIO()  # what the function prints is not its result
    _result = {function}(*_json.loads({args!r}), **_json.loads({kwargs!r}))
    _sys.stdout = _out
    print(_json.dumps(_result))

__codegym_call()
"""

# One file for every program and every test: each run gets its program and tests on stdin, so that the
# sandbox runs them all in one session (one checker for all of them, see the runner), of any task. The
# runner itself is part of the agent, loaded in the box before any fork.
ASSERT_RUNNER = RUNNER


def call_program(code: str, function: str, args: list[object], kwargs: dict[str, object] | None) -> str:
    if not function.isidentifier():
        raise ValueError(f"function {function!r} is not a Python identifier")
    return _CALL.format(code=code, function=function, args=json.dumps(args), kwargs=json.dumps(kwargs or {}))


def assert_stdin(code: str, assert_code: str) -> bytes:
    """What :data:`ASSERT_RUNNER` reads on stdin to judge ``code`` against ``assert_code``."""
    program = code.encode("utf-8", "surrogatepass")
    return f"{len(program)}\n".encode() + program + assert_code.encode("utf-8", "surrogatepass")


def assert_outcome(exit_code: int | None) -> bool | None:
    """What an assert run that ended by itself says: passed (True), failed its tests (False), or neither
    (None: the program's own failure, whose verdict is the run's)."""
    if exit_code == 0:
        return True
    return False if exit_code == WRONG_ANSWER else None


def call_result(stdout: bytes) -> tuple[bool, object]:
    try:
        return True, json.loads(stdout)
    except ValueError:
        return False, None
