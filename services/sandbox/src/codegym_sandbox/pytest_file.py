"""A ``pytest`` program: one file that holds a program and its tests, judged as assert tests are.

SandboxFusion runs such a file with ``pytest test_main.py`` and takes a pass from that process's exit status, but
the program's code runs in that process too: it can end it with status 0 whenever it likes (``os._exit(0)`` as it
is imported, an ``atexit`` handler) or patch pytest's report, and a wrong program passes. Here the file is two
parts, split where its tests begin, and run with the assert runner (``agent/assert_runner.py``): the program's part
in the program's process, the tests' part in the checker, which calls the program's names over the channel and
whose word alone is the pass. The tests' part is the file from its first top-level statement that pytest would
collect or use (a ``test*`` function, a ``Test*`` class or a unittest case, a fixture or anything pytest decorates,
pytest's module hooks, ``pytestmark``), with the imports right before it; everything before it is the program's.
"""

from __future__ import annotations

import ast

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
# Where a file has no test, pytest collects none and fails the run (its exit status 5): so do the tests here.
NO_TESTS = "raise AssertionError('no tests ran: the file defines no test that pytest would collect')\n"


def assert_run(code: str) -> tuple[str, bytes]:
    """The main script and the stdin of the assert run that judges the pytest file ``code``."""
    program, tests = split(code)
    return ASSERT_MAIN, assert_stdin(program, tests)


def split(code: str) -> tuple[str, str]:
    """The program's part and the tests' part of ``code``. The tests' part keeps its lines' numbers (blank lines
    stand for the program's), so that a failure names the file's line. A file that does not parse is all the
    program's: its syntax error is the program's, as under pytest."""
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return code, ""
    first = next((i for i, node in enumerate(body) if _tests_begin(node)), None)
    if first is None:
        return code, NO_TESTS
    while first > 0 and _own_import(body, first - 1):
        first -= 1
    node = body[first]
    line = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    lines = code.splitlines(keepends=True)
    # The test libraries the program's part imports are the tests' too (`from pytest import approx` above a helper):
    # as the program's stand-ins, an `approx` or a `TestCase` of theirs would be no test's.
    head = ["\n"] * (line - 1)
    for before in body[:first]:
        if _test_library(before) and before.lineno < line:
            head[before.lineno - 1] = ast.unparse(before) + "\n"
    return "".join(lines[: line - 1]), "".join(head) + "".join(lines[line - 1 :])


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


def _test_library(node: ast.stmt) -> bool:
    """Whether ``node`` imports pytest or unittest (or a module of theirs), and nothing else."""
    if isinstance(node, ast.Import):
        return all(alias.name.split(".")[0] in _TEST_LIBRARIES for alias in node.names)
    return isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in _TEST_LIBRARIES


def _own_import(body: list[ast.stmt], i: int) -> bool:
    """Whether ``body[i]`` is an import on lines of its own (no other statement shares them)."""
    node = body[i]
    if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.col_offset:
        return False
    return i == 0 or (body[i - 1].end_lineno or 0) < node.lineno
