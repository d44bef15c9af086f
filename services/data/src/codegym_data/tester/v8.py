"""Line coverage of JavaScript programs from V8's block coverage (``NODE_V8_COVERAGE``).

The instrumented run is a ``nodejs`` program (:data:`DRIVER`) that runs the program given beside it in a
second node with ``NODE_V8_COVERAGE`` set (stdin, stdout and stderr are the driver's), then collects the
program's part of what node wrote at its exit. V8 reports ranges of source (UTF-16 offsets) with how often
each ran, nested; :func:`line_counts` turns them into lines, here on the trusted side. A line's count is the
count of the innermost range that holds all of its code, as c8 (node's own coverage tool) counts it; lines
of only comments, brackets and separators are not counted at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codegym_sandbox.models import ExecuteRequest, ExecuteResponse, LimitsIn, Test

from .instrument import OUT, b64, fetched_json
from .report import LineCoverage

PROGRAM = "program.js"
DRIVER = """\
const { spawnSync } = require("child_process");
const fs = require("fs");
const dir = ".codegym-v8";
const child = spawnSync(process.execPath, [...process.execArgv, %(program)s],
                        { stdio: "inherit", env: { ...process.env, NODE_V8_COVERAGE: dir } });
if (fs.existsSync(dir)) {
  const scripts = [];
  for (const name of fs.readdirSync(dir)) {
    const data = JSON.parse(fs.readFileSync(dir + "/" + name, "utf8"));
    scripts.push(...data.result.filter((s) => s.url.endsWith("/" + %(program)s)));
  }
  fs.writeFileSync(%(out)s, JSON.stringify(scripts));
}
process.exit(child.status === null ? 1 : child.status);
"""
_NOT_CODE = set("{}()[];,")


def code_spans(source: str) -> dict[int, tuple[int, int]]:
    """Each line that holds code: the UTF-16 offsets of its first and last character of code.

    Comments and whitespace are not code, and a line of only brackets and separators (``});``) is not
    counted. A rough scanner: strings and template literals are code, regular expressions are not told
    apart from division.
    """
    spans: dict[int, tuple[int, int]] = {}
    significant: set[int] = set()
    line, offset, i, n = 1, 0, 0, len(source)
    state = "code"  # or "line comment", "block comment", or the quote that opened a string
    while i < n:
        ch = source[i]
        width = 2 if ord(ch) > 0xFFFF else 1
        is_code = False
        if ch == "\n":
            line += 1
            if state == "line comment":
                state = "code"
        elif state == "code":
            if source.startswith("//", i):
                state = "line comment"
            elif source.startswith("/*", i):
                state, i, offset = "block comment", i + 1, offset + 1
            elif not ch.isspace():
                is_code = True
                if ch in "'\"`":
                    state = ch
        elif state == "block comment":
            if source.startswith("*/", i):
                state, i, offset = "code", i + 1, offset + 1
        elif state in "'\"`":
            is_code = True
            if ch == "\\":
                i, offset = i + 1, offset + 1  # the escaped character (never a line's end in practice)
            elif ch == state:
                state = "code"
        if is_code:
            first, _ = spans.get(line, (offset, offset))
            spans[line] = (first, offset)
            if ch not in _NOT_CODE:
                significant.add(line)
        i, offset = i + 1, offset + width
    return {k: v for k, v in spans.items() if k in significant}


def line_counts(source: str, scripts: Sequence[Any]) -> dict[int, int]:
    """How often each line of code ran, from V8's coverage of the script (see the module's docstring)."""
    ranges = [
        (int(r["startOffset"]), int(r["endOffset"]), int(r["count"]))
        for script in scripts
        for function in script["functions"]
        for r in function["ranges"]
    ]
    counts: dict[int, int] = {}
    for line, (first, last) in code_spans(source).items():
        holding = [(end - start, count) for start, end, count in ranges if start <= first and last < end]
        if holding:
            counts[line] = min(holding)[1]
    return counts


class V8:
    """Node's ``NODE_V8_COVERAGE`` in a second node under a driver (see the module's docstring)."""

    note = "JavaScript: V8 block coverage (NODE_V8_COVERAGE) mapped to lines of code"

    def request(self, code: str, test: Test, function: str | None, limits: LimitsIn) -> ExecuteRequest:
        driver = DRIVER % {"program": f'"{PROGRAM}"', "out": f'"{OUT}"'}
        return ExecuteRequest(
            language="nodejs",
            code=driver,
            stdin=test.stdin,
            files={PROGRAM: b64(code)},
            fetch_files=[OUT],
            limits=limits,
        )

    def read(self, code: str, response: ExecuteResponse) -> LineCoverage | str:
        data = fetched_json(response)
        if isinstance(data, str):
            return data
        try:
            assert isinstance(data, list) and data, "no coverage of the program"
            counts = line_counts(code, data)
        except (AssertionError, KeyError, TypeError, ValueError) as exc:
            return f"V8's coverage is not what was expected ({type(exc).__name__}: {exc})"
        return LineCoverage.from_counts(counts)
