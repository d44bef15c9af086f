"""Helpers shared by the competitive-programming adapters (APPS, CodeContests, LiveCodeBench)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from codegym_sandbox.models import CallComparison


def as_text(value: Any) -> str:
    """A test's input or output as text: lists of lines are joined, other values printed."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(as_text(v) for v in value)
    return str(value)


def json_field(value: Any, default: Any) -> Any:
    """A field that datasets store as a JSON string (or already decoded); ``default`` when empty or broken."""
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return default


def stdio_tests(inputs: list[Any], outputs: list[Any], limit: int | None = None) -> list[dict[str, Any]]:
    """stdin/stdout tests from parallel lists of inputs and expected outputs."""
    tests = [{"stdin": as_text(i), "expected_stdout": as_text(o)} for i, o in zip(inputs, outputs, strict=False)]
    return tests[:limit] if limit is not None else tests


def method_assert(
    cls: str, method: str, args: list[Any], expected: Any, rule: CallComparison, *, fallback: bool = False
) -> str:
    """An assert test calling ``cls().method(*args)`` (LeetCode-style starters), comparing by the dataset's call
    ``rule`` (``tasks.rules``) as the APPS and LiveCodeBench harnesses do: Python's ``==`` with the JSON value, a
    returned tuple as a list (so ``True`` passes for ``1``, a ``Fraction`` for an equal float), and under APPS's
    rule a list of tuples as a list of lists (``call_test.apps_lists``, written out here: the test is Python the
    checker runs). With ``fallback``, a program without ``cls`` is called at its top-level ``method``, as those
    harnesses call a program that defines no ``class Solution``: only where nothing else (a builtin, the
    harness's prelude) goes by that name, which would answer for a program that defines nothing."""
    apps = (
        "if isinstance(_got, list) and _got and isinstance(_got[0], tuple)"
        " and all(isinstance(_x, (tuple, list)) for _x in _got):\n"
        "    _got = [list(_x) for _x in _got]\n"
    )
    called = f"{cls}().{method}"
    if fallback:
        called = "_f"
        head = f"try:\n    _f = {cls}().{method}\nexcept NameError:\n    _f = {method}\n"
    return (
        "import json as _json\n" + (head if fallback else "") + f"_got = {called}(*_json.loads({json.dumps(args)!r}))\n"
        "_got = list(_got) if isinstance(_got, tuple) else _got\n"
        + (apps if rule is CallComparison.APPS else "")
        + f"assert _got == _json.loads({json.dumps(expected)!r}), 'wrong answer'\n"
    )


_CALLED = re.compile(r"^_got = (?:\w+\(\)\.\w+|_f)\(\*_json\.loads\((.+)\)\)$", re.MULTILINE)
_EXPECTED = re.compile(r"^assert _got == _json\.loads\((.+)\), 'wrong answer'$", re.MULTILINE)


def method_call_data(code: str) -> tuple[list[Any], Any] | None:
    """The arguments and expected value of an assert test :func:`method_assert` wrote (the dataset's call data,
    which a statement may print as an example); None for any other code."""
    called, expected = _CALLED.search(code), _EXPECTED.search(code)
    if called is None or expected is None:
        return None
    try:
        args, value = (json.loads(ast.literal_eval(m[1])) for m in (called, expected))
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None
    return (args, value) if isinstance(args, list) else None


# What LeetCode-style harnesses import before a solution: its signatures use these names unimported.
LEETCODE_PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom functools import *\nfrom itertools import *\n"
    "from heapq import *\nfrom bisect import *\nimport math\n"
)
