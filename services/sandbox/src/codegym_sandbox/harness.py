"""Python test harnesses for function-call and assert tests.

Function-call tests: the harness calls the function and prints only its JSON result; the expected value
stays on the server, which compares. Assert tests run beside the program; they pass only if the harness
prints a nonce after the tests, a nonce the harness reads from stdin (with the program) before the
program's code runs, so exiting 0 early or patching ``sys.exit`` does not pass. The nonce is a MAC of the
program and its tests under a key that never leaves the server: no program can know it beforehand, and
the same program against the same tests gets the same one, so that its result can be cached. The nonce lives only
in the harness's frame, never in a global the program could call; a program that walks the interpreter's
frames can still find it (see SECURITY.md), which is why rewards should prefer stdin/stdout and function-call tests.
Results of a call must be plain data (no object can compare equal to everything).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

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

# The program and its tests run inside this function, in the module's namespace: the nonce and the
# descriptor it goes out on live only in the function's frame, never under a name the program can call.
# The nonce, the tests and the program come on stdin (read whole, as bytes, before the program runs: it
# then reads end-of-file, as it would with no input), so that this file is the same for every program and
# every test, and the sandbox compiles it once for all the assert tests it judges together, of any task.
ASSERT_RUNNER = """
def __codegym_harness():
    import os, sys
    nonce = sys.stdin.buffer.readline().strip()
    checks = sys.stdin.buffer.read(int(sys.stdin.buffer.readline())).decode("utf-8", "surrogatepass")
    program = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
    out = os.dup(1)
    scope = sys.modules["__main__"].__dict__
    del scope["__codegym_harness"]
    exec(compile(program, "<program>", "exec"), scope)
    exec(compile(checks, "<tests>", "exec"), scope)
    for stream in (sys.stdout, sys.__stdout__):  # what the program printed must come before the nonce
        try:
            stream.flush()
        except Exception:
            pass
    os.write(out, b"\\n" + nonce + b"\\n")


__codegym_harness()
"""


_NONCE_KEY = secrets.token_bytes(32)  # this server process's own: never in a request, a run or a log


def call_program(code: str, function: str, args: list[object], kwargs: dict[str, object] | None) -> str:
    if not function.isidentifier():
        raise ValueError(f"function {function!r} is not a Python identifier")
    return _CALL.format(code=code, function=function, args=json.dumps(args), kwargs=json.dumps(kwargs or {}))


def assert_stdin(code: str, assert_code: str) -> tuple[bytes, str]:
    """What :data:`ASSERT_RUNNER` reads on stdin to judge ``code`` against ``assert_code``, and the nonce
    that proves the tests ran to the end."""
    checks = assert_code.encode("utf-8", "surrogatepass")
    program = code.encode("utf-8", "surrogatepass")
    body = f"{len(checks)}\n".encode() + checks + program
    nonce = hmac.new(_NONCE_KEY, body, hashlib.sha256).hexdigest()[:32]
    return f"{nonce}\n".encode() + body, nonce


def assert_passed(stdout: bytes, nonce: str) -> bool:
    return stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1] == nonce.encode()


def call_result(stdout: bytes) -> tuple[bool, object]:
    try:
        return True, json.loads(stdout)
    except ValueError:
        return False, None
