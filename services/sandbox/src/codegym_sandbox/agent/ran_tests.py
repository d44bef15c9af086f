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
from typing import Any, NamedTuple

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
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
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
        if owner is None or isinstance(owner, type):
            ran.add((key, owner if isinstance(owner, type) else None))
        elif not getattr(owner, "__dict__", None):  # a fresh instance, as pytest's: one the code set up is not
            ran.add((key, type(owner)))

    scope[RAN] = record
    return ran


class Around(NamedTuple):
    """What decides whether a run of the code's is pytest's run of a test: what the code ran (``ran``, before
    collection ran anything), the names it loads (``named``), the keys of definitions several tests were made from
    (``shared``: a loop's, whose record cannot say which ran), the fixtures pytest gives (``fixtures``), the marks
    around the test (``marks``: the module's, its classes'), and whether pytest runs anything of the tests' around it
    (``hooked``: an xunit hook, an autouse fixture, ``usefixtures``; or ``pytest_generate_tests``)."""

    ran: Ran
    named: set[str]
    shared: set[str]
    fixtures: set[str]
    marks: list[object]
    hooked: bool


def around(
    ran: Ran, named: set[str], values: list[object], fixtures: Fixtures, marks: list[object], hooks: bool
) -> Around:
    """The :class:`Around` of tests among ``values`` (a scope's, a class's), in ``fixtures``, under ``marks``;
    ``hooks``: whether xunit hooks of the tests' run around them."""
    autouse = any(found.autouse for found in fixtures.defined.values())
    used = any(getattr(mark, "name", None) in ("usefixtures", "parametrize") for mark in marks)
    names = {*fixtures.defined, *fixtures.builtin, "request"}
    return Around(ran, named, shared(values), names, marks, hooks or autouse or used)


def ran_by_the_code(name: str, test: Any, owner: type | None, seen: Around) -> bool:
    """Whether the tests' code ran the test bound to ``name`` itself, as pytest would run it: the function it is (or
    that a decorator's wrapper of it runs) recorded a call with nothing given but its instance (a fresh one, as
    pytest's), on ``owner`` (a method's class; None for a function). Never where pytest would run it otherwise
    (:class:`Around`: with hooks or fixtures around it, its params, one of a loop's), nor one pytest gives arguments,
    or that takes any the code may give (a default, ``*args``, ``**kwargs``): a helper named test_* that takes what no
    fixture gives, pytest cannot run, and a script ran it. Where it records nothing (a function made by a function
    of theirs, a lambda), the code naming it is taken for running it (left open)."""
    recorded = key(test)
    if recorded is None:
        return name in seen.named
    function = wrapped(test)
    code = function.__code__
    if function.__defaults__ or function.__kwdefaults__ or code.co_flags & 0x0C or code.co_kwonlyargcount:
        return False  # *args (0x04), **kwargs (0x08), a default: the code may have given what pytest does not
    wanted = set(requested(test, owner is not None))
    if seen.hooked or recorded in seen.shared or _marked(test, seen.marks):
        return False
    if wanted & seen.fixtures:
        return False
    return (recorded, owner) in seen.ran


def shared(values: list[object]) -> set[str]:
    """The keys of definitions that several of ``values`` (distinct function objects) were made from."""
    functions = {id(value): value for value in values if isinstance(wrapped(value), types.FunctionType)}
    counts = collections.Counter(key(function) for function in functions.values())
    return {found for found, count in counts.items() if found is not None and count > 1}


def _marked(test: Any, marks: list[object]) -> bool:
    """Whether pytest gives the test params or fixtures by marks: its own, or those around it."""
    own = pytest_marks.marks_of(getattr(test, "pytestmark", None))
    return any(getattr(mark, "name", None) in ("parametrize", "usefixtures") for mark in [*own, *marks])
