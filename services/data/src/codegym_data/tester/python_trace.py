"""Line coverage of Python programs with the standard library's ``sys.settrace``.

coverage.py is not among the packages programs may import (``services/sandbox/runtime/packages.txt``, an
allow-list that both the local runtime and the runtime images are built from, and that an attacker reviews):
adding it would rebuild every runtime for a measurement the standard library can make. So the driver
(:data:`DRIVER`) compiles the program under the name :data:`FILENAME`, records every ``line`` event of code
compiled from it (in every thread it starts), runs the test in the program's namespace, and writes the line
numbers it saw. Child processes the program starts are not traced.

The executable lines are computed here, on the trusted side, from the program's code objects
(``co_lines``): a traced line is counted only if it is one of them.
"""

from __future__ import annotations

import json
import types

from codegym_sandbox.models import ExecuteRequest, ExecuteResponse, LimitsIn, Test

from .instrument import OUT, fetched_json
from .report import LineCoverage

FILENAME = "<program>"  # what tracebacks of the instrumented run call the program

# The test is run as the judge runs it: an assert test's code after the program in the program's namespace,
# a call test's call of ``function``, a stdin test by the program reading its stdin.
DRIVER = """\
import json, linecache, sys, threading

_SPEC = json.loads({spec!r})
_FILE = _SPEC["file"]
_hits = set()


def _line(frame, event, arg):
    if event == "line":
        _hits.add(frame.f_lineno)
    return _line


def _call(frame, event, arg):
    return _line if frame.f_code.co_filename == _FILE else None


linecache.cache[_FILE] = (len(_SPEC["source"]), None, _SPEC["source"].splitlines(True), _FILE)
_program = compile(_SPEC["source"], _FILE, "exec")
_ns = {{"__name__": "__main__", "__builtins__": __builtins__}}
threading.settrace(_call)
sys.settrace(_call)
try:
    exec(_program, _ns)
    if _SPEC["assert_code"] is not None:
        exec(compile(_SPEC["assert_code"], "<test>", "exec"), _ns)
    elif _SPEC["function"] is not None:
        _ns[_SPEC["function"]](*_SPEC["call"], **_SPEC["kwargs"])
finally:
    sys.settrace(None)
    threading.settrace(None)
    with open(_SPEC["out"], "w") as _fh:
        json.dump(sorted(_hits), _fh)
"""


def executable_lines(code: str) -> frozenset[int]:
    """The lines of ``code`` that hold bytecode: those a line event can be reported for.

    Line 0 is the module's own start (``RESUME``), never a line of the source.
    """
    lines: set[int] = set()
    stack = [compile(code, FILENAME, "exec")]
    while stack:
        co = stack.pop()
        lines.update(line for _, _, line in co.co_lines() if line is not None and line > 0)
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return frozenset(lines)


class PythonTrace:
    """``sys.settrace`` in a driver around the program (see the module's docstring)."""

    note = "Python: line events of sys.settrace in the instrumented run; executable lines from co_lines"

    def request(self, code: str, test: Test, function: str | None, limits: LimitsIn) -> ExecuteRequest:
        spec = {
            "file": FILENAME,
            "source": code,
            "out": OUT,
            "assert_code": test.assert_code,
            "function": function if test.call is not None else None,
            "call": test.call or [],
            "kwargs": test.kwargs or {},
        }
        driver = DRIVER.format(spec=json.dumps(spec))
        return ExecuteRequest(language="python", code=driver, stdin=test.stdin, fetch_files=[OUT], limits=limits)

    def read(self, code: str, response: ExecuteResponse) -> LineCoverage | str:
        data = fetched_json(response)
        if isinstance(data, str):
            return data
        if not isinstance(data, list) or not all(isinstance(n, int) for n in data):
            return "the coverage data is not a list of line numbers"
        executable = executable_lines(code)
        return LineCoverage(executable, executable & frozenset(data))
