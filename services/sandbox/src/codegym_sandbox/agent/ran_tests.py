"""Which tests the tests' own code ran itself: those collection must not run again, and only those.

Tests may be scripts that call their own test functions (``test_add()`` at the end, a ``__main__`` block that runs
one); collection then runs what pytest would collect but what the code ran, as a script runs a test once: run
again, a test that counts on the state its first run left would fail. Taken for run where it was not, a test is
never run at all, and any program passes it: where the record cannot say, the test is not taken for run.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Iterator
from typing import Any

from . import pytest_marks
from .fixture_requests import TESTS_FILE, Fixtures, requested, wrapped

Ran = frozenset[tuple[str, "type | None"]]

RAN = "__codegym_ran__"  # in the tests' scope: what records each function of theirs that ran (see compiled)


def compiled(text: str) -> types.CodeType:
    """The tests' code. Each function of it that a runner could collect (``test*`` and ``check`` outside functions:
    in its blocks and its classes; every one there where the tests say ``__test__`` of any) records itself when
    called (:data:`RAN`: its :func:`key`, and a method its class, from its first argument), first thing:
    collection then runs the tests the code never ran itself, whether it named them or not, and none it ran (a
    test that counts on the state its first run left fails run again). A test the code ran and then defined again
    (a ``def`` of the same name further down) is another, which pytest runs; so is each test method of a class the
    code ran some of, and a method a class inherits that the code ran on its base. No other function records (a
    helper of theirs may run millions of times, within the run's time)."""
    if "def " not in text:
        return compile(text, TESTS_FILE, "exec", dont_inherit=True)
    import ast  # only in the checker, never in the agent that programs are forked from

    try:
        tree = ast.parse(text, TESTS_FILE)
    except BaseException:
        return compile(text, TESTS_FILE, "exec", dont_inherit=True)  # its own error, as Python shows it
    every = "__test__" in text  # set however (an assignment, setattr, a decorator): any function may be a test
    for node, method in _collectable(tree.body):
        if not every and not node.name.startswith(("test", "check")):
            continue
        first = node.body[0]
        value = first.value if isinstance(first, ast.Expr) else None
        docstring = isinstance(value, ast.Constant) and isinstance(value.value, str)
        line = node.decorator_list[0].lineno if node.decorator_list else node.lineno  # as co_firstlineno counts
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        owner: ast.expr = ast.Constant(None)
        if method and node.args.args and not static:
            owner = ast.Name(node.args.args[0].arg, ast.Load())  # self, or a classmethod's cls
        record = ast.Expr(ast.Call(ast.Name(RAN, ast.Load()), [ast.Constant(f"{node.name}@{line}"), owner], []))
        node.body.insert(1 if docstring else 0, ast.copy_location(record, first))
    return compile(ast.fix_missing_locations(tree), TESTS_FILE, "exec", dont_inherit=True)


def _collectable(body: list[Any], method: bool = False) -> Iterator[tuple[Any, bool]]:
    """The functions ``body`` defines outside functions, each with whether it is a class's: in its blocks (``if``,
    ``try``, ``with``, loops) and in its classes, nested ones too."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, method
        elif isinstance(node, ast.ClassDef):
            yield from _collectable(node.body, True)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _collectable(getattr(node, field, None) or [], method)


def key(function: Any) -> str | None:
    """What ``function`` records as it runs (:func:`compiled`): its name and first line; None for one that records
    nothing (a lambda, a function not of the tests' code)."""
    code = getattr(wrapped(function), "__code__", None)
    return f"{code.co_name}@{code.co_firstlineno}" if code is not None and RAN in code.co_names else None


def recorder(scope: dict[str, object]) -> set[tuple[str, type | None]]:
    """The test functions that ran, as :data:`RAN` in the tests' ``scope`` records them: each one's :func:`key`,
    with a method's class (that of the instance it ran on)."""
    ran: set[tuple[str, type | None]] = set()

    def record(key: str, owner: object) -> None:
        ran.add((key, owner if owner is None or isinstance(owner, type) else type(owner)))

    scope[RAN] = record
    return ran


def ran_by_the_code(
    name: str, test: Any, named: set[str], ran: Ran, owner: type | None, shared: set[str], fixtures: set[str]
) -> bool:
    """Whether the tests' code ran the test bound to ``name`` itself, as pytest would run it: the function it is (or
    that a decorator's wrapper of it runs) recorded so (``ran``: what the code ran, before collection ran anything),
    for ``owner`` (a method's class; None for a function). Never one pytest gives arguments the code may not have
    given it (``parametrize``'s cases, or only ``fixtures``: a helper named test_* that takes what no fixture gives,
    pytest cannot run, and a script ran it), nor one of several functions made from one definition (``shared``: a
    loop's, whose record cannot say which ran). Where it records nothing (a function made by a function of theirs, a
    lambda), the code naming it (``named``) is taken for running it (left open)."""
    recorded = key(test)
    if recorded is None:
        return name in named
    wanted = set(requested(test, owner is not None))
    if recorded in shared or _parametrized(test, owner) or (wanted and wanted <= fixtures):
        return False
    return (recorded, owner) in ran


def given(fixtures: Fixtures) -> set[str]:
    """The names pytest gives a test as fixtures: the tests' own, pytest's that the checker makes, ``request``."""
    return {*fixtures.defined, *fixtures.builtin, "request"}


def shared(values: list[object]) -> set[str]:
    """The keys of definitions that several of ``values`` (distinct function objects) were made from."""
    functions = {id(value): value for value in values if isinstance(wrapped(value), types.FunctionType)}
    counts = collections.Counter(key(function) for function in functions.values())
    return {found for found, count in counts.items() if found is not None and count > 1}


def _parametrized(test: Any, owner: type | None) -> bool:
    marks = [*pytest_marks.marks_of(getattr(test, "pytestmark", None))]
    if owner is not None:
        marks += pytest_marks.of_class(owner)
    return any(getattr(mark, "name", None) == "parametrize" for mark in marks)
