"""``codegym-data test``: run a program's tests in the sandbox and print each test's verdict and line coverage."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

from codegym_evaluator import python_syntax
from codegym_sandbox.verdicts import Verdict

from ..options import add_command
from .report import TestReport
from .tester import Tester, TesterError, TestSpec

DESCRIPTION = """\
Run a program's tests in the codegym sandbox: each test's verdict (the sandbox judge's) and the lines of the
program it ran, and the union over the tests: covered and executable lines, percent, uncovered lines.
Coverage is measured for Python (sys.settrace), C and C++ (gcov) and JavaScript (V8); other languages get
verdicts only. A program can fake its own coverage: measure trusted code, never reward with it.
"""

EPILOG = """\
tests (--tests FILE):
  .py             each top-level assert is a test, run after the program with the file's other top-level
                  statements (imports, helpers); a file without one is a single test (HumanEval's check)
  .json, .jsonl   tests as the sandbox takes them: {"stdin": "1 2\\n", "expected_stdout": "3\\n"},
                  {"assert_code": "assert f(1) == 2"}, {"call": [1], "expected": 2} (with --function),
                  or a string (an assert test)
rows (--rows FILE.jsonl): one program a line, {"id": ..., "language": ..., "code": ..., "tests": [...],
  "function": ...}; a report for each.

examples:
  codegym-data test --language python --code sol.py --tests test_sol.py
  codegym-data test --language c --code sol.c --tests cases.jsonl --json
  codegym-data test --rows programs.jsonl --sandbox-url http://127.0.0.1:8080

Exit status: 0 when every test passed, 1 when one did not, 2 for bad input or an unreachable sandbox.
"""


def add_parser(sub: Any) -> None:
    """Add ``test`` to ``codegym-data``'s subcommands."""
    parser = add_command(
        sub,
        "test",
        help="run a program's tests in the sandbox: verdicts and line coverage per test and in total",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("--language", help="Language of --code (python, c, cpp, nodejs, ...: the sandbox's names).")
    parser.add_argument("--code", type=Path, help="The program under test.")
    parser.add_argument("--tests", type=Path, help="Its tests: .py asserts, or .json/.jsonl tests (see below).")
    parser.add_argument("--function", help="The function that call tests call.")
    parser.add_argument("--rows", type=Path, help="A jsonl of programs with their tests, instead of the three above.")
    parser.add_argument("--comparison", default="exact", help="How stdout is compared (default: exact).")
    parser.add_argument("--timeout", type=float, default=5.0, help="Time limit of one test, in seconds (default: 5).")
    parser.add_argument("--no-coverage", action="store_true", help="Verdicts only.")
    parser.add_argument("--json", action="store_true", help="Print the reports as JSON (one object a line).")
    parser.add_argument("--sandbox-url", help="A running codegym sandbox; else a local one starts for the run.")
    parser.add_argument("--sandbox-token", help="Bearer token of the sandbox API.")
    parser.set_defaults(func=run_command)


def split_asserts(source: str) -> list[str]:
    """The tests of a Python test file: one per top-level assert, each after every other top-level statement
    that comes before it; the whole file when it has no top-level assert."""
    tree = python_syntax.parse(source)
    preamble: list[str] = []
    tests: list[str] = []
    for node in tree.body:
        segment = ast.get_source_segment(source, node) or ""
        if isinstance(node, ast.Assert):
            tests.append("\n".join([*preamble, segment]) + "\n")
        else:
            preamble.append(segment)
    return tests or [source]


def read_tests(path: Path) -> list[TestSpec]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return list(split_asserts(text))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return list(data) if isinstance(data, list) else [data]


def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.rows is not None:
        if args.code or args.tests:
            raise ValueError("--rows replaces --code and --tests")
        rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [{"language": args.language, "function": args.function, **row} for row in rows]
    if not (args.language and args.code and args.tests):
        raise ValueError("give --language, --code and --tests, or --rows")
    code = args.code.read_text(encoding="utf-8")
    return [
        {
            "id": str(args.code),
            "language": args.language,
            "code": code,
            "tests": read_tests(args.tests),
            "function": args.function,
        }
    ]


def run_command(args: argparse.Namespace) -> int:
    """Judge every program, print its table (or JSON); the exit status says whether all passed."""
    reports: list[TestReport] = []
    try:
        rows = _rows(args)
        with Tester(
            args.sandbox_url, token=args.sandbox_token, timeout_s=args.timeout, coverage=not args.no_coverage
        ) as tester:
            for n, row in enumerate(rows):
                if not row.get("language") or "code" not in row or not row.get("tests"):
                    raise ValueError(f"row {n + 1} needs language, code and tests")
                report = tester.run(
                    row["language"], row["code"], row["tests"], function=row.get("function"), comparison=args.comparison
                )
                reports.append(report)
                name = row.get("id", n + 1)
                if args.json:
                    print(json.dumps({"id": name, **report.to_dict()}))
                else:
                    print(f"{'' if n == 0 else chr(10)}== {name}\n{report.table()}")
    except (OSError, ValueError, TesterError) as exc:
        print(f"codegym-data test: error: {exc}", file=sys.stderr)
        return 2
    return 0 if all(r.verdict is Verdict.AC for r in reports) else 1
