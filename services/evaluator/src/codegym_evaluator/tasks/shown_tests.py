"""Whether a prompt writes out one of a task's tests: what ``Task.for_training`` counts as shown.

A test is shown where the prompt holds what a table of answers needs: its stdin and its expected output; of a
call (a call test, or the assert codegym writes from a dataset's call data: APPS's and LiveCodeBench's
LeetCode-style rows), its arguments and then its expected value, close together (an example:
``persistence(39) => 3``, or ``Input: nums = [2,7], target = 9`` and ``Output: [0,1]`` on the lines after); of an
assert test, each of its asserts, as written or as such an example of its call: ``assert f(1, 2) == 3`` (or
``candidate(1, 2)`` in HumanEval's ``check(candidate)``), ``assert f(x)`` and ``assert not f(x)`` (the values
True and False), ``math.isclose(f(x), 0.5)`` and ``abs(f(x) - 0.5) < 1e-6`` are shown by a docstring's
``>>> f(1, 2)`` with ``3`` on the next line. An assert whose call or value is not written as a literal (a loop of
asserts, a value computed first) is shown only as written.
Values are looked for as JSON and as Python write them, with either quote and however spaced around brackets and
commas, and never inside a longer number or word (``39`` is not in ``390``).

A test is also shown where it is the same test as one a model sees whole (:func:`same_test`): a hidden copy of a
public test is passed by a table of the public answers as well as by a solution, wherever it stands in the task's
tests.
"""

from __future__ import annotations

import ast
import json
import re
from contextlib import suppress
from functools import lru_cache
from typing import Any

from codegym_evaluator import python_syntax

from .shown_asserts import checks
from .stdio import method_call_data

# The lines an example spans: its input, its output, and a line between (``Explanation:`` comes after).
EXAMPLE_LINES = 3
_SPACED = re.compile(r"\s*([\[\](){},:])\s*")


def written_out(test: dict[str, Any], prompt: str, function: str | None = None, seen_asserts: int = 0) -> bool:
    """Whether ``test`` (of a task whose entry point is ``function``) is written out in ``prompt``; of an assert
    test, whether each of its asserts past the first ``seen_asserts`` is (those a model sees anyway: the cut copy
    ``Task.visible_tests`` shows of a task's one assert test)."""
    text = _flat(prompt)  # whitespace aside
    if test.get("assert_code") is not None:
        code = str(test["assert_code"])
        data = method_call_data(code)
        if _shown(code, text) or (data is not None and call_written_out(*data, prompt, function)):
            return True
        return asserts_written_out(code, prompt, function, seen_asserts)
    if test.get("expected_stdout") is not None:  # a test without input whose output the task names is the task
        stdin = test.get("stdin") or ""
        return bool(stdin.strip()) and _shown(stdin, text) and _shown(test["expected_stdout"], text)
    if isinstance(test.get("call"), list) and "expected" in test:
        return call_written_out(test["call"], test["expected"], prompt, function)
    return False


def same_test(test: dict[str, Any]) -> tuple[str, object]:
    """What ``test`` asks, as a value equal for two tests that a table of answers passes alike: of a stdin test
    its input and its expected output, each as its words (every comparison of outputs but ``exact`` ignores how
    they are spaced, and a program that reads words reads both inputs alike); of a call test its arguments and
    expected value, as Python writes them (``1``, ``1.0`` and ``True`` differ); of an assert test its code's
    syntax tree, its layout and comments aside (its text stripped where it does not parse).

    >>> same_test({"stdin": "3\\n", "expected_stdout": "9\\n"}) == same_test({"stdin": "3", "expected_stdout": "9"})
    True
    >>> same_test({"assert_code": "assert f(1)==2"}) == same_test({"assert_code": "assert f(1) == 2  # one"})
    True
    """
    if test.get("assert_code") is not None:
        return "assert", _tree(str(test["assert_code"]))
    if test.get("expected_stdout") is not None:
        return "stdio", (_words(test.get("stdin") or ""), _words(test["expected_stdout"]))
    return "call", repr((test.get("call"), test.get("kwargs") or {}, test.get("expected")))


def _words(text: object) -> str:
    return " ".join(str(text).split())


def _tree(code: str) -> str:
    try:
        return ast.dump(python_syntax.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code.strip()


def asserts_written_out(code: str, prompt: str, function: str | None = None, seen: int = 0) -> bool:
    """Whether every assert of ``code`` (``shown_asserts.checks``: at its top level and in the functions it
    defines) past its first ``seen`` is written out in ``prompt``: its own text, or its call's arguments and
    expected value as an example (:func:`call_written_out`), or one of the first ``seen`` again. False for code
    that asserts nothing past them or does not parse.

    >>> check = "def check(candidate):\\n    assert candidate([3, 1]) == [1, 3]\\n"
    >>> asserts_written_out(check, ">>> sort_list([3, 1])\\n[1, 3]", "sort_list")
    True
    >>> asserts_written_out(check + "    assert candidate([]) == []\\n", ">>> sort_list([3, 1])\\n[1, 3]")
    False
    """
    try:
        tree = python_syntax.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    asserting = checks(tree)
    hidden, shown = asserting[seen:], {ast.dump(stmt) for _, _, stmt in asserting[:seen]}
    text = _flat(prompt)
    return bool(hidden) and all(
        ast.dump(stmt) in shown
        or _shown(ast.get_source_segment(code, stmt) or ast.unparse(stmt), text)
        or _written_call(assert_data(stmt, _callees(owner, function)), prompt, function)
        for _, owner, stmt in hidden
    )


def _written_call(data: tuple[list[Any], Any] | None, prompt: str, function: str | None) -> bool:
    return data is not None and (bool(data[0]) or function is not None) and call_written_out(*data, prompt, function)


def _callees(owner: ast.FunctionDef | ast.AsyncFunctionDef | None, function: str | None) -> set[str]:
    """The names an assert calls the model's function by: the entry point, and in a function such as HumanEval's
    ``check(candidate)`` its first parameter (what its caller passes)."""
    names = {function} if function else set()
    positional = [*owner.args.posonlyargs, *owner.args.args] if owner is not None else []
    return names | ({positional[0].arg} if positional else set())


def assert_data(stmt: ast.stmt, callees: set[str]) -> tuple[list[Any], Any] | None:
    """The arguments and expected value of an assert that checks one call of a function named in ``callees``:
    ``f(args) == value`` (either way round, or ``is``), ``f(args)`` (True), ``not f(args)`` (False),
    ``isclose(f(args), value)`` and ``abs(f(args) - value) < eps`` (either way round, or ``<=``); arguments and
    value Python literals, no keyword arguments. None for any other statement."""
    if not isinstance(stmt, ast.Assert):
        return None
    test = stmt.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        args = _call_args(test.operand, callees)
        return None if args is None else (args, False)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            return _pair(left, right, callees) or _pair(right, left, callees)
        if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Call) and _named(left.func, "abs"):
            diff = left.args[0] if len(left.args) == 1 and not left.keywords else None
            if isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub) and _literal(right) is not _NONE:
                return _pair(diff.left, diff.right, callees) or _pair(diff.right, diff.left, callees)
        return None
    if isinstance(test, ast.Call) and _named(test.func, "isclose") and len(test.args) == 2:
        return _pair(test.args[0], test.args[1], callees) or _pair(test.args[1], test.args[0], callees)
    args = _call_args(test, callees)
    return None if args is None else (args, True)


_NONE = object()


def _pair(call: ast.expr, value: ast.expr, callees: set[str]) -> tuple[list[Any], Any] | None:
    args, expected = _call_args(call, callees), _literal(value)
    return None if args is None or expected is _NONE else (args, expected)


def _call_args(node: ast.expr, callees: set[str]) -> list[Any] | None:
    """The literal arguments of a call of one of ``callees``; None for anything else."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in callees:
        return None
    if node.keywords:
        return None
    args = [_literal(arg) for arg in node.args]
    return None if any(arg is _NONE for arg in args) else args


def _literal(node: ast.expr) -> Any:
    """The value of a Python literal (``_NONE`` for anything else: a name, a call, a starred argument)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NONE


def _named(func: ast.expr, name: str) -> bool:
    """Whether ``func`` is ``name`` or a module's ``name`` (``math.isclose``)."""
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


def _shown(value: object, text: str) -> bool:
    written = " ".join(str(value).split())
    return bool(written) and written in text


def call_written_out(args: list[Any], expected: Any, prompt: str, function: str | None = None) -> bool:
    """Whether a call with ``args`` whose answer is ``expected`` is an example of ``prompt``: within
    ``EXAMPLE_LINES`` lines, each argument in order and then the expected value (a call without arguments:
    ``function()`` and then the value).

    >>> call_written_out([39], 3, "For example:\\n  persistence(39) => 3  # 3*9 = 27")
    True
    >>> call_written_out([390], 3, "persistence(39) => 3")
    False
    """
    wanted = [_pattern(value) for value in args] if args else [_pattern(None, f"{function}()")]
    answer = _pattern(expected)
    if answer is None or any(p is None for p in wanted) or not answer.search(_normal_prompt(prompt)):
        return False
    for window in _windows(prompt):
        at = 0
        for pattern in [*wanted, answer]:
            found = pattern.search(window, at) if pattern is not None else None
            if found is None:
                break
            at = found.end()
        else:
            return True
    return False


# A prompt is read once for all its tests (a task has hundreds): these keep the last prompts' readings.
@lru_cache(maxsize=8)
def _flat(prompt: str) -> str:
    return " ".join(prompt.split())


@lru_cache(maxsize=8)
def _windows(prompt: str) -> tuple[str, ...]:
    """Each line of ``prompt`` with the lines of its example after it, normalised (:func:`_normal`)."""
    lines = prompt.splitlines()
    return tuple(_normal(" ".join(lines[start : start + EXAMPLE_LINES])) for start in range(len(lines)))


@lru_cache(maxsize=8)
def _normal_prompt(prompt: str) -> str:
    return _normal(prompt)


def _normal(text: str) -> str:
    """``text`` with one kind of quote, and no space around brackets, commas and colons."""
    return _SPACED.sub(r"\1", text.replace("'", '"'))


def _pattern(value: Any, written: str | None = None) -> re.Pattern[str] | None:
    """The ways ``value`` is written (JSON's, Python's), never inside a longer number or word; None for a value
    that cannot be written."""
    forms = {written} if written is not None else set()
    if written is None:
        with suppress(TypeError, ValueError, RecursionError):
            forms.add(json.dumps(value, ensure_ascii=False))
        with suppress(TypeError, ValueError, RecursionError):
            forms.add(repr(value))
    forms = {_normal(form) for form in forms if form.strip()}
    if not forms:
        return None
    return re.compile("|".join(_bounded(form) for form in sorted(forms, key=len, reverse=True)))


def _bounded(form: str) -> str:
    """A pattern of ``form`` that a number or word it begins or ends with may not run on from."""
    before = r"(?<![\w.])" if form[0].isalnum() or form[0] in "-." else ""
    after = r"(?!\w|\.\d)" if form[-1].isalnum() else ""
    return f"{before}{re.escape(form)}{after}"
