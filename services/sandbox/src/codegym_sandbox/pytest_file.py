"""A ``pytest`` program: one file that holds a program and its tests, judged as assert tests are.

SandboxFusion runs such a file with ``pytest test_main.py`` and takes a pass from that process's exit status, but
the program's code runs in that process too: it can end it with status 0 whenever it likes (``os._exit(0)`` as it
is imported, an ``atexit`` handler) or patch pytest's report, and a wrong program passes. Here the file is two
parts, split where its tests begin, and run with the assert runner (``agent/assert_runner.py``): the program's part
in the program's process, the tests' part in the checker, which calls the program's names over the channel and
whose word alone is the pass. The tests' part is the file from its first top-level statement that pytest would
collect or use (a ``test*`` function, a ``Test*`` class or a unittest case, a fixture or anything pytest decorates,
pytest's module hooks, ``pytestmark``), from the first line that no statement before it shares; everything before
it is the program's, imports and all, and none of it is the tests' code. The tests get only the test libraries'
own names that the program's part imports plainly (``import pytest``, ``from pytest import approx``), imported
anew in the checker (:func:`_library_imports`).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from . import pytest_decorators
from .agent import program_bytes, program_names
from .agent.assert_stdin import ASSERT_MAIN, assert_stdin

# pytest's module and function hooks (xunit style), unittest's module hooks (pytest runs them too).
_HOOKS = frozenset(
    {
        "setup_module",
        "teardown_module",
        "setup_function",
        "teardown_function",
        "setUpModule",
        "tearDownModule",
    }
)
_TEST_LIBRARIES = ("pytest", "unittest")
_BUILTINS = frozenset(dir(builtins))
# A line as Python counts them (``str.splitlines`` ends lines at form feeds and separators too, and its numbers would
# move the program's last lines into the tests' part).
_WORDS = re.compile(r"\w+")  # a name wherever the text has it: in code, strings and comments alike
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# Where a file has no test, pytest collects none and fails the run (its exit status 5): so do the tests here.
NO_TESTS = "raise AssertionError('no tests ran: the file defines no test that pytest would collect')\n"
# The largest file split here: its parse, walk and compiles take the server a process of its pool and some 0.6 GB a
# MiB of dense statements (a file of 15 MiB, well within a request's body, held 6 GB; round 57). A file past it is
# judged as one that defines no test, saying why: a test file of a quarter MiB is far past any task's.
SPLIT_MAX_CHARS = 256 << 10
TOO_LARGE = (
    f"raise AssertionError('no tests ran: the file is longer than the {SPLIT_MAX_CHARS} characters a pytest file "
    "is split into its program and its tests at most')\n"
)
# Where the file cannot be split, its tests' part fails, whatever the program's part does: a part of no test passed,
# and a file whose text did not parse but whose bytes compiled (a byte-order mark, ``# coding: utf-7``) ran its
# program and no test (round 58). Where the program's own compile fails, its error is the run's, as before.
UNPARSED = "raise AssertionError('no tests ran: the file could not be split into its program and its tests')\n"
DECORATED = (
    "raise AssertionError(\"no tests ran: the first test of the file has a decorator that is no test library's, one "
    "that skips it or expects it to fail, one whose arguments are more than data, or a patch: "
    'the last line of a completion may decorate the first test")\n'
)
DECLARED = (
    "raise AssertionError('no tests ran: the file declares an encoding other than UTF-8, which its program and its "
    "tests are not split in')\n"
)


T = TypeVar("T")


class Analyse(Protocol):
    """How the server works on a text a request sent (a file split: :func:`assert_run`): ``fn(text)``, for
    ``client``. The server's is its analysis pool's (``judging/off_loop.analysed``, passed to the ``Executor``):
    off its event loop, in the client's turn, charged to the memory budget (round 57)."""

    def __call__(self, client: str, fn: Callable[[str], T], text: str) -> Awaitable[T]: ...


class TooCostly(Exception):
    """Work on a text a request sent that took more of the server than it may (:class:`Analyse`: the analysis
    pool's bounds): its caller says so for the request, which no retry makes cheaper."""


async def on_the_loop(client: str, fn: Callable[[str], T], text: str) -> T:
    """:class:`Analyse` where there is no pool (an executor of a test's own)."""
    return fn(text)


def assert_run(code: str) -> tuple[str, bytes]:
    """The main script and the stdin of the assert run that judges the pytest file ``code``."""
    program, tests = split(code)
    return ASSERT_MAIN, assert_stdin(program, tests)


async def analysed_run(analyse: Analyse, client: str, code: str) -> tuple[str, bytes]:
    """:func:`assert_run`, split by ``analyse`` for ``client``; where the split took more than the server gives it
    (:class:`TooCostly`), all of ``code`` the program's, its tests' part failing saying so. A file too long to
    split is not given to ``analyse``: it would be charged for a parse that is never made."""
    if len(code) > SPLIT_MAX_CHARS:
        return assert_run(code)
    try:
        return await analyse(client, assert_run, code)
    except TooCostly as exc:
        why = f"no tests ran: splitting the file into its program and its tests took {exc}"
        return ASSERT_MAIN, assert_stdin(code, f"raise AssertionError({why!r})\n")


def split(code: str) -> tuple[str, str]:
    """The program's part and the tests' part of ``code``. The tests' part keeps its lines' numbers (blank lines
    stand for the program's), so that a failure names the file's line. A file that does not parse is all the
    program's: its syntax error is the program's, as under pytest, and its tests' part fails. So is a file longer
    than ``SPLIT_MAX_CHARS``, or one that declares an encoding other than UTF-8, its tests' part failing saying
    why. The server splits a file off its event loop
    (``Executor.analyse``): parsed there, one request of a few MiB held every client's requests for seconds."""
    if len(code) > SPLIT_MAX_CHARS:
        return code, TOO_LARGE
    read = program_bytes.read_as(code)  # split as the interpreter reads the file (a byte-order mark taken off)
    if read is None:
        return code, DECLARED
    try:
        return _split(read)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a parse, a walk or a compile too deep for them
        return code, UNPARSED


def _split(code: str) -> tuple[str, str]:
    tree = ast.parse(code)
    body = tree.body
    first = next((i for i, node in enumerate(body) if _tests_begin(node)), len(body))
    # The tests' part starts on a line of its own: a statement of the program's that shares the first test's line
    # (``x = 1; pytestmark = []``) stays the program's, and so does that test.
    while 0 < first < len(body) and (body[first - 1].end_lineno or 0) >= _line(body[first]):
        first += 1
    if first == len(body):
        return code, NO_TESTS
    line = _line(body[first])
    lines = _LINES.findall(code)
    program = "".join(lines[: line - 1])
    head = ["\n"] * (line - 1)
    imported, tests_names = _library_imports(body[:first], program)
    for at, imports in imported:
        head[at - 1] = imports + "\n"
    for at, table in _tables(body, first, lines):
        head[at : at + len(table)] = table
    a_test = getattr(body[first], "name", "").lower().startswith("test")
    if not pytest_decorators.by_tests(body[first], tests_names, a_test, pytest_decorators.fixtures(tree)):
        return program, DECORATED
    return program, program_names.WHOLE_FILE + "".join(head) + "".join(lines[line - 1 :])


def _tables(body: list[ast.stmt], first: int, lines: list[str]) -> list[tuple[int, list[str]]]:
    """The program's statements (``body[:first]``, of the file's ``lines``) that the tests' part gets too, each as
    its first line's index and its lines: a table of literals bound to a name that nothing after it in the program's
    part names (``CASES = [(1, 2, 3), ...]`` before a ``parametrize``), on lines of its own. Such a table is the
    dataset's data, and the tests read it as the file wrote it, not as the program's process answers it: a
    completion rewrote its process's ``CASES`` before it answered so that every case expected its wrong answer
    (round 60). A literal runs no code in the checker; one that the file changes later stays the program's part's
    alone, as before. What comes before it (a completion's, where the table is the dataset's) has no say: a
    completion that named the table, in a string even, kept it its own; one whose last line joined the table's
    (``H.x = \\``) has only its names bound to it (:func:`_bound_alone`)."""
    tables: list[tuple[int, list[str]]] = []
    after: Counter[str] = Counter()  # the names in the program's lines after the statement at hand
    seen = _line(body[first]) - 1
    for at in reversed(range(first)):
        node, end = body[at], body[at].end_lineno or 0
        for text in lines[end:seen]:
            after.update(_WORDS.findall(text))
        seen = min(seen, end)
        # A plain assignment: a module's annotation runs (``T: [setattr(...)] = 1`` replaced the checker's runner;
        # round 64), and a literal's value runs nothing.
        if not isinstance(node, ast.Assign):
            continue
        # Never a dunder: ``__builtins__``, ``__test__`` and the checker's own are the module's, not a table; nor
        # does one keep the table the program's (``__x__ = \\`` then ``CASES = [...]``; round 65).
        names = [t.id for t in node.targets if isinstance(t, ast.Name) and not t.id[:2] == t.id[-2:] == "__"]
        if not names or any(after[name] for name in names):
            continue
        alone = (at == 0 or (body[at - 1].end_lineno or 0) < node.lineno) and _line(body[at + 1]) > end
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if alone:
            own = lines[node.lineno - 1 : end]
            tables.append((node.lineno - 1, own if len(names) == len(node.targets) else _bound_alone(node, names, own)))
    return tables


def _bound_alone(node: ast.Assign, names: list[str], own: list[str]) -> list[str]:
    """``node``'s lines (``own``) binding its value to its ``names`` alone: a completion's last line that ends in a
    continuation made the dataset's table one value of its assignment (``H.x = \\`` then ``CASES = [...]``), and its
    ``H.x`` changed the list in place before ``CASES`` was bound (round 64). Its other targets are the program's."""
    start = node.value.lineno - node.lineno
    line = own[start].encode()
    value = line[node.value.col_offset :].decode()  # the offset counts bytes
    return ["\n"] * start + [" = ".join(names) + " = " + value] + own[start + 1 :]


def _library_imports(program: list[ast.stmt], source: str) -> tuple[list[tuple[int, str]], dict[str, list[str]]]:
    """The imports of libraries that the tests' part gets for the program's statements ``program`` (its text
    ``source``), each with the line of the program's import it stands for; and the test libraries' names among them,
    each with the path it reaches (``from pytest import mark``: ``mark`` reaches pytest, mark).

    No statement of the program's becomes the tests' code: the tests get a test library's own objects, and a
    comparison helper's, imported anew in the checker, written here (``import pytest``, ``from pytest import
    approx``, ``import pytest as pt``, ``from math import isclose``), so that the tests' ``approx``, ``isclose`` or
    ``TestCase`` is the checker's and no stand-in of the program's, which the program's part could have patched in
    its process first (round 59: pytest's and unittest's names; round 60: ``from math import isclose``, ``from
    numpy.testing import assert_allclose`` and ``import pytest as pt``). Never a name the program chose for a test
    library's function (``from pytest import approx as add``: the program's answer would be a genuine approx), a
    test runner's ``main`` (the checker's answers 0: ``test_scope.no_runner_main``), a builtin's name, a private one,
    a star's, any other library's (:func:`_library_aliases`), or a name a later statement of the program binds again
    (``from operator import truth as all`` after it binds the program's ``all``): as the file runs, the last binding
    is the name's. A binding before the import is not the name's: taken for the program's, ``approx = None`` first
    left the tests the program's ``approx`` (round 59).
    """
    imported = [(i, node, alias) for i, node in enumerate(program) for alias in _library_aliases(node)]
    if not imported or not program_names.compiles(source):
        return [], {}
    # The last statement that binds each name as the module runs (compiled from the tree, never printed from it:
    # ``ast.unparse`` could not print some trees that parse, and the request was a 500). A set of what those after
    # each statement bind was quadratic: 64 KiB of assignments, 3 GB and 5 s (round 64).
    last: dict[str, int] = {}
    for i, statement in enumerate(program):
        code = compile(ast.Module([statement], []), "<program>", "exec", dont_inherit=True)
        last.update(dict.fromkeys(program_names.own_names(code), i))
    lines: dict[int, list[str]] = {}
    tests_names: dict[str, list[str]] = {}
    for i, node, alias in imported:
        bound = alias.asname or alias.name.partition(".")[0]  # ``import unittest.mock`` binds ``unittest``
        if last.get(bound, -1) > i or bound in _BUILTINS:
            continue
        named = f" as {alias.asname}" if alias.asname not in (None, alias.name) else ""
        if isinstance(node, ast.Import):
            lines.setdefault(node.lineno, []).append(f"import {alias.name}{named}")
            path = alias.name.split(".") if alias.asname else [bound]
        elif isinstance(node, ast.ImportFrom):
            lines.setdefault(node.lineno, []).append(f"from {node.module} import {alias.name}{named}")
            path = [*(node.module or "").split("."), alias.name]
        else:
            continue
        if path[0] in _TEST_LIBRARIES:
            tests_names[bound] = path
    return [(line, "; ".join(imports)) for line, imports in lines.items()], tests_names


def _library_aliases(node: ast.stmt) -> list[ast.alias]:
    """The names that ``node`` imports of a library the tests check with (see :func:`_library_imports`): a test
    library's module by any name (``import pytest as pt``) and its public names by their own, and a comparison
    helper's (``_HELPERS``) by any; never a star, a private name or a test runner's ``main``. Never another
    library's name: the checker's ``eval`` or ``pickle.loads`` under a name the program chose ran what the program
    gave it there, the checker's ``date`` or ``deque`` equalled no value of the program's, and its ``random.seed``
    seeded no generator of the program's (round 61)."""
    if isinstance(node, ast.Import):
        return [alias for alias in node.names if _library(alias.name) or _helper(alias.name, None)]
    if not isinstance(node, ast.ImportFrom) or node.level:
        return []
    module = node.module or ""
    return [
        alias
        for alias in node.names
        if _public(alias.name)
        and (
            (_library(module) and alias.name != "main" and alias.asname in (None, alias.name))
            or _helper(module, alias.name)
        )
    ]


# Comparison helpers tests check a program's values with, run in the checker on what it reads of them: these names
# of a module, and a module's ``assert_`` functions (``None``). Each returns a bool, or raises, and runs no code it is
# given (numpy.testing's ``runstring`` ``exec``s its argument: round 62).
_HELPERS: dict[str, frozenset[str] | None] = {
    "math": frozenset({"isclose"}),
    "cmath": frozenset({"isclose"}),
    "numpy": frozenset({"isclose", "allclose", "array_equal", "array_equiv", "testing"}),
    "numpy.testing": None,
}


def _helper(module: str, name: str | None) -> bool:
    """Whether ``module`` (``name`` of it, or the module itself where None) is a comparison helper's."""
    if name is None:
        return module in _HELPERS and _HELPERS[module] is None  # a module: the tests' to call, never the program
    names = _HELPERS.get(module, frozenset())
    return name in names if names is not None else name.startswith("assert_")


def _library(module: str) -> bool:
    """Whether ``module`` is a public module of a test library's (pytest's or unittest's), none of its runner."""
    parts = module.split(".")
    return parts[0] in _TEST_LIBRARIES and all(map(_public, parts)) and "main" not in parts


def _public(name: str) -> bool:
    """Whether ``name`` is a plain public name (no star, no ``_private`` or ``__dunder__`` one)."""
    return name.isidentifier() and not name.startswith("_")


def _line(node: ast.stmt) -> int:
    """The first line of ``node``, its decorators' included."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _tests_begin(node: ast.stmt) -> bool:
    """Whether pytest collects or uses ``node``: a test, a test class, a fixture or hook, the module's marks."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test") or node.name in _HOOKS or any(map(_names_pytest, node.decorator_list))
    if isinstance(node, ast.ClassDef):
        bases = [*node.bases, *(k.value for k in node.keywords)]
        return node.name.startswith("Test") or any(map(_names_pytest, node.decorator_list + bases))
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets)
    return False


def _names_pytest(expr: ast.expr) -> bool:
    """Whether ``expr`` names pytest, one of its fixtures or marks, or unittest's cases."""
    for sub in ast.walk(expr):
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        if name in ("pytest", "fixture", "mark", "unittest") or name.endswith("TestCase"):
            return True
    return False
