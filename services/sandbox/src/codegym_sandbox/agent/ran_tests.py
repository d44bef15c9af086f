"""Which tests collection leaves to the tests' own code: only those pytest cannot run, and only where the code ran
them.

Tests may be scripts that call their own test functions (``test_add()`` at the end, a ``__main__`` block that runs
some). Collection runs every test pytest would run, whether the code ran it or not, as pytest does (it runs a call
at the top of the tests as it imports them, and the test again as it collects it): a run of the code's cannot stand
for pytest's, which may differ in what it is given, the hooks, fixtures and params around it, and any state the code
set around its call; taken for pytest's, a test was never run at all, and any program passed it. What pytest cannot
run, and errors on for every program, is the script's alone where the script ran it: a generator function the code
drives (pytest refuses ``yield`` tests), a function that takes an argument no fixture or param gives (a helper named
test_* that the script calls with its cases). So is HumanEval's ``check``, which its harness calls once, where the
code did not (a route appends the call).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

from . import pytest_marks
from .fixture_requests import TESTS_FILE, Fixtures, requested, wrapped

_GENERATOR = 0x20
RAN = "__codegym_ran__"  # in the tests' scope: what records each function of theirs that ran (see compiled)


def compiled(text: str) -> types.CodeType:
    """The tests' code. Each function of it that a runner could collect (``test*`` and ``check`` outside functions:
    in its blocks and its classes; every one there where the tests say ``__test__`` of any) records itself when
    called (:data:`RAN`: its :func:`key`), first thing: what pytest cannot run is the script's to run, and only
    where it ran it (:func:`scripts_alone`). No other function records (a helper of theirs may run millions of
    times, within the run's time)."""
    if "def " not in text:
        return compile(text, TESTS_FILE, "exec", dont_inherit=True)
    import ast  # only in the checker, never in the agent that programs are forked from

    try:
        tree = ast.parse(text, TESTS_FILE)
    except BaseException:
        return compile(text, TESTS_FILE, "exec", dont_inherit=True)  # its own error, as Python shows it
    every = "__test__" in text  # set however (an assignment, setattr, a decorator): any function may be a test
    for node in _collectable(tree.body):
        if not every and not node.name.startswith(("test", "check")):
            continue
        first = node.body[0]
        value = first.value if isinstance(first, ast.Expr) else None
        docstring = isinstance(value, ast.Constant) and isinstance(value.value, str)
        line = node.decorator_list[0].lineno if node.decorator_list else node.lineno  # as co_firstlineno counts
        record = ast.Expr(ast.Call(ast.Name(RAN, ast.Load()), [ast.Constant(f"{node.name}@{line}")], []))
        node.body.insert(1 if docstring else 0, ast.copy_location(record, first))
    return compile(ast.fix_missing_locations(tree), TESTS_FILE, "exec", dont_inherit=True)


def _collectable(body: list[Any]) -> Iterator[Any]:
    """The functions ``body`` defines outside functions: in its blocks (``if``, ``try``, ``with``, loops, ``match``)
    and in its classes, nested ones too."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _collectable(node.body)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                yield from _collectable(getattr(node, field, None) or [])


def key(function: Any) -> str | None:
    """What ``function`` records as it runs (:func:`compiled`): its name and first line; None for one that records
    nothing (a lambda, a function not of the tests' code)."""
    code = getattr(wrapped(function), "__code__", None)
    return f"{code.co_name}@{code.co_firstlineno}" if code is not None and RAN in code.co_names else None


def recorder(scope: dict[str, object]) -> set[str]:
    """The functions of the tests' that ran, as :data:`RAN` in the tests' ``scope`` records them (:func:`key`)."""
    ran: set[str] = set()
    scope[RAN] = ran.add
    return ran


def scripts_alone(test: Any, method: bool, fixtures: Fixtures, marks: list[object], ran: set[str]) -> bool:
    """Whether ``test`` (a function of the tests', or a method where ``method``) is the script's alone: pytest cannot
    run it in ``fixtures`` under ``marks`` (those around it), and the code ran it (``ran``). One the code never ran is
    collected, and is the tests' error, as it is pytest's, for every program."""
    function = wrapped(test)
    code = getattr(function, "__code__", None)
    if code is None or key(test) not in ran:
        return False
    if code.co_flags & _GENERATOR:
        return True
    own = pytest_marks.marks_of(getattr(test, "pytestmark", None))
    given = {*fixtures.defined, *fixtures.builtin, "request"}
    for case, _ in pytest_marks.cases([*own, *marks])[:1]:
        given |= set(case)
    return bool(set(requested(test, method)) - given)
