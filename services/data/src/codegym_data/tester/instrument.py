"""How coverage is measured for a language: the instrumented run sent to the sandbox, and how its answer is read.

Every instrument runs the program under test in an ordinary sandbox run of a language the sandbox already
has (the program's own, or ``bash`` for C and C++), with the program given as a file beside a small driver.
The driver writes what it measured into :data:`OUT`, which comes back through ``fetch_files``: the program's
stdout and stderr stay its own. Nothing is added to what a program may do: the driver is an ordinary program.
"""

from __future__ import annotations

import base64
import json
from typing import Protocol

from codegym_sandbox.models import ExecuteRequest, ExecuteResponse, LimitsIn, Test

from .report import LineCoverage

OUT = ".codegym-coverage.json"  # what the driver measured, in the run's scratch directory


class Instrument(Protocol):
    """Coverage for one language."""

    note: str  # how coverage is measured, for the report

    def request(self, code: str, test: Test, function: str | None, limits: LimitsIn) -> ExecuteRequest:
        """The instrumented run of ``code`` on ``test``."""
        ...

    def read(self, code: str, response: ExecuteResponse) -> LineCoverage | str:
        """The lines the run covered, or why they are not known."""
        ...


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def fetched_json(response: ExecuteResponse) -> object | str:
    """The driver's JSON output, or why the run left none (a crash, a kill at a limit, a compile error)."""
    data = response.files.get(OUT)
    if data is None:
        step = response.run or response.compile
        why = f"the instrumented run ended with {response.verdict.value}"
        if step is not None and step.stderr.strip():
            why += ": " + step.stderr.strip().splitlines()[-1][:200]
        return why + ", leaving no coverage data"
    try:
        parsed: object = json.loads(base64.b64decode(data))
    except ValueError as exc:
        return f"the coverage data is not JSON ({exc})"
    return parsed
