"""The languages whose run is a test run (SandboxFusion's ``pytest`` and ``D_ut``) never pass on an exit status.

The program's code runs in the process that runs the tests, so the status of that process is the program's to
set: ending it with 0 before the tests ran or after they failed passed a wrong program on ``/run_code`` and
``/v1/execute``. A ``pytest`` file is judged by the assert runner (its program's part in the program's process,
its tests in the checker: ``codegym_sandbox.pytest_file``); a ``D_ut`` run that exits 0 is not judged (SE).
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
from codegym_sandbox import pytest_file
from codegym_sandbox.agent import program_names
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.judging import off_loop
from fastapi.testclient import TestClient

TESTS = "\ndef test_add():\n    assert add(2, 3) == 5\n"
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return 0\n"
# What a wrong program adds to end the run with status 0, each where pytest's one process ran it.
ENDS = {
    "exit-at-import": "import os\nos._exit(0)\n",
    "exit-handler": "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "fixture-that-exits": (
        "import pytest\n\n@pytest.fixture(autouse=True)\ndef _end():\n    import os\n    os._exit(0)\n"
    ),
}
# A file in the forms pytest files have: marks, fixtures, a helper, approx, raises, a test class.
RICH_TESTS = """
import pytest
from pytest import approx

CASES = [(1, 2, 3), (-1, 1, 0)]


def check(a, b, c):
    assert add(a, b) == c


@pytest.fixture
def pair():
    yield (2, 3)


@pytest.mark.parametrize("a,b,c", CASES)
def test_add(a, b, c):
    check(a, b, c)


def test_pair(pair):
    assert add(*pair) == 5


def test_raises():
    assert add(0.1, 0.2) == approx(0.3)
    with pytest.raises(TypeError):
        add(1, None)


class TestMore:
    def test_neg(self):
        assert add(-2, -3) == -5
"""


def _both(client: TestClient, code: str) -> tuple[dict[str, Any], dict[str, Any]]:
    json_body = {"content-type": "application/json"}  # written here: JSON carries a lone surrogate, escaped
    fusion = client.post("/run_code", content=json.dumps({"code": code, "language": "pytest"}), headers=json_body)
    native = client.post(
        "/v1/execute", content=json.dumps({"code": code, "language": "pytest", "cache": False}), headers=json_body
    )
    assert fusion.status_code == native.status_code == 200, (fusion.text, native.text)
    return fusion.json(), native.json()


@pytest.mark.parametrize("code", [RIGHT + TESTS, RIGHT + RICH_TESTS], ids=["plain", "rich"])
def test_a_right_pytest_file_passes(hostile: TestClient, code: str) -> None:
    fusion, native = _both(hostile, code)
    assert fusion["status"] == "Success" and fusion["run_result"]["return_code"] == 0, fusion
    assert native["verdict"] == "AC", native


@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_wrong_pytest_file_that_ends_its_run_fails(hostile: TestClient, end: str) -> None:
    for code in (WRONG + ENDS[end] + TESTS, ENDS[end] + WRONG + TESTS, WRONG + ENDS[end] + RICH_TESTS):
        fusion, native = _both(hostile, code)
        assert fusion["status"] == "Failed" and fusion["run_result"]["return_code"] != 0, fusion
        assert native["verdict"] != "AC", native


# How a test file may end: its module is ``__main__`` here, and each exit says it passed (round 60: every one failed
# a right file, as the checker read its own type hints with ``eval`` while the tests ran, which tainted the run).
TESTS_ENDS = {
    "pytest-main": "\nif __name__ == '__main__':\n    import sys\n    sys.exit(pytest.main([__file__]))\n",
    "unittest-main": "\nif __name__ == '__main__':\n    import unittest\n    unittest.main()\n",
    "exit-0": "\nimport sys\nsys.exit(0)\n",
    # The builtins' exit() and quit(), site's: theirs raised in a library's frame, taken for one that exited.
    "builtin-exit": "\nif __name__ == '__main__':\n    exit(pytest.main(['-v']))\n",
    "builtin-quit": "\nquit()\n",
}


@pytest.mark.parametrize("end", sorted(TESTS_ENDS))
def test_a_file_whose_tests_end_in_an_exit_is_judged_by_its_tests(hostile: TestClient, end: str) -> None:
    tests = "\nimport pytest\n" + TESTS + TESTS_ENDS[end]
    fusion, native = _both(hostile, RIGHT + tests)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fusion, native = _both(hostile, WRONG + tests)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


PRIME_TESTS = (
    "\nimport pytest\n\ndef test_primes():\n    assert all(is_prime(p) for p in [2, 3, 5, 7, 11])\n\n"
    "def test_type():\n    assert isinstance(is_prime(4), bool)\n"
)
RIGHT_PRIME = "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n"
WRONG_PRIME = "def is_prime(n):\n    return 0\n"
# A wrong program's statements that would bind the tests' own builtins, were they the tests' code: a test library's
# object under a name the program chose, imports on its last lines (right before the tests' `import pytest`), one
# on the first test's line, and a statement after a comment that Python counts as one line and `str.splitlines` as
# three, and `approx(2, rel=3) == 5` as the tests' `add(2, 3) == 5`.
BORROWED = {
    "mock-as-builtins": (
        "from unittest.mock import MagicMock as all, MagicMock as isinstance\n\n" + WRONG_PRIME + PRIME_TESTS
    ),
    "trailing-import": WRONG_PRIME + "\nfrom operator import truth as all, is_not as isinstance\n" + PRIME_TESTS,
    "shared-line": WRONG_PRIME + "from operator import truth as all; pytestmark = []\ndef test_primes():\n"
    "    assert all(is_prime(p) for p in [2, 3, 5, 7, 11])\n",
    "line-separators": "# \x1c\x1c\n" + WRONG_PRIME + "all = isinstance = lambda *args: True\n" + PRIME_TESTS,
    "approx-as-add": "from pytest import approx as add\n\ndef _add(a, b):\n    return 0\n"
    + TESTS
    + "    assert add(10, 20) == 30\n",
}
# Round 59: a binding of a test library's name before the program's plain import of it (or a dead function's
# `global` after it) was taken for the program's: the tests got the program's `approx`, which it had patched.
APPROX_PATCHED = (
    "import pytest\n\nclass Same:\n    def __eq__(self, other):\n        return True\n\n"
    "pytest.approx = lambda *a, **k: Same()\n"
)
APPROX_TESTS = "\nfrom pytest import approx\n\ndef test_add():\n    assert add(1, 2) == approx(3)\n"
BORROWED |= {
    "bound-before-the-import": APPROX_PATCHED + "approx = None\n" + WRONG + APPROX_TESTS,
    "global-in-a-dead-function": APPROX_PATCHED
    + WRONG
    + APPROX_TESTS.replace("\ndef test_add", "\ndef _never():\n    global approx\n    approx = 0\n\n\ndef test_add"),
}


@pytest.mark.parametrize("name", sorted(BORROWED))
def test_no_statement_of_the_program_is_the_tests_code(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, BORROWED[name])
    assert fusion["status"] == "Failed" and fusion["run_result"]["return_code"] != 0, fusion
    assert native["verdict"] != "AC", native
    program, tests = pytest_file.split(BORROWED[name])
    tests = tests.removeprefix(program_names.WHOLE_FILE)  # the mark of a file's tests (``read_tests``)
    assert program == BORROWED[name][: len(program)]
    assert set(tests.split("def test_")[0].split()) <= {"import", "pytest", "from", "approx"}, tests


# Round 60: a library's name imported right before the tests (the dataset's header) was a stand-in of the
# program's, whose process the program's part patched first; a test library renamed too (`import pytest as pt`),
# and `from pytest import main`, the checker's stub answering 0, was a program that passed a CLI task's tests.
SAME = "class Same:\n    def __eq__(self, other):\n        return True\n\n"
LIBRARY_CHEATS = {
    "isclose-patched": WRONG + "import math\nmath.isclose = lambda *a, **k: True\n"
    "\nfrom math import isclose\n\ndef test_add():\n    assert isclose(add(2, 3), 5)\n",
    "renamed-pytest": "import pytest\n" + SAME + "pytest.approx = lambda *a, **k: Same()\n\ndef add(a, b):\n"
    "    return Same()\n\nimport pytest as pt\n\ndef test_add():\n    assert add(2, 3) == pt.approx(5)\n",
    "pytest-main": "from pytest import main\n\ndef test_main():\n    assert main(['--version-of-nothing']) == 0\n",
    # Round 61: any other library's name the program imports stays the program's: the checker's `eval` under a name
    # the program chose ran the program's string there, and `unittest.main` as a module was the runner's stub.
    "eval-as-decode": "from builtins import eval as decode\n\ndef encode(s):\n"
    "    return \"__import__('sys').modules['codegym_sandbox.agent.test_forms'].__dict__.update(_run=lambda *a, **k: "
    "None) or 'hello'\"\n\ndef test_roundtrip():\n    assert decode(encode('hello')) == 'hello'\n\n"
    "def test_encode():\n    assert encode('abc') == 'def'\n",
    "unittest-main-module": "import unittest.main as main\n\ndef test_main():\n    assert main(['x']) is None\n",
    # Round 62: of numpy.testing, only its assert_ functions: runstring exec()s what it is given.
    "runstring": 'from numpy.testing import runstring as execute\n\ndef translate(s):\n    return "import sys\\n'
    "x = 3\\nsys.modules['codegym_sandbox.agent.test_forms'].__dict__.update(_run=lambda *a, **k: None)\\n\"\n\n"
    "def test_run():\n    env = {}\n    execute(translate('let x = 1 + 2'), env)\n    assert env['x'] == 3\n\n"
    "def test_translate():\n    assert translate('let y = 5') == 'y = 5'\n",
}


@pytest.mark.parametrize("name", sorted(LIBRARY_CHEATS))
def test_a_library_the_tests_import_is_the_checkers(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, LIBRARY_CHEATS[name])
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


# Round 60: a completion is the file's first part, and its last line can be a decorator of the dataset's first test:
# one of the program's (a lambda that replaces the test), a mark that skips it or expects its failure, or a
# fixture's (the file's one test made a fixture: none ran); or a line that skips every test (round 62). A first test's
# decorators are a test library's now, none that skips or expects a failure, and in a pytest file every test runs
# and passes: none skipped, none expected to fail, none of no case, and a file none of whose tests is collected fails.
ONE_TEST = (
    "\n@pytest.mark.parametrize('a,b,c', [(2, 3, 5), (1, 1, 2)])\ndef test_add(a, b, c):\n    assert add(a, b) == c\n"
)
DANGLING = {
    "replaced": "@(lambda test: (lambda: None))\n",
    "skipped": "@pytest.mark.skip\n",
    "skipped-if": "@pytest.mark.skipif(True, reason='')\n",
    "expected-to-fail": "@pytest.mark.xfail\n",
    "unittest-skip": "@unittest.skip('')\n",
    "made-a-fixture": "@pytest.fixture\n",
    # Round 62: other roads to a skip, and what is no decorator of a test's.
    "skip-by-getattr": "@pytest.mark.__getattr__('skip')\n",
    "a-param": "@pytest.param\n",
    "approx": "@pytest.approx\n",
    "no-case": "@pytest.mark.parametrize('x', [])\n",
    "a-case-skipped": "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.skip)])\n",
    # ... or a line that skips the whole file (the tests' part begins with it).
    "module-skipped": "pytestmark = pytest.mark.skip\n",
    "module-expected-to-fail": "pytestmark = [pytest.mark.xfail(run=False)]\n",
    "module-skipped-by-its-hook": "def setup_module():\n    pytest.skip('', allow_module_level=True)\n",
    # Round 63: a patch, run in the checker, of what the tests call or compare with.
    "patched-by-new": "from unittest import mock\n@mock.patch('__main__.add', new=lambda a, b: a + b)\n",
    "patched-by-a-positional-new": "from unittest import mock\n@mock.patch('__main__.add', lambda a, b: a + b)\n",
    "patched-dict": "from unittest import mock\n@mock.patch.dict('__main__.__dict__', {'add': lambda a, b: a + b})\n",
    "patched-object": "from unittest import mock\n"
    "@mock.patch.object(__import__('__main__'), 'add', lambda *a: sum(a))\n",
    "patched-multiple": "from unittest import mock\n@mock.patch.multiple('__main__', add=lambda a, b: a + b)\n",
    "patched-return": "from unittest.mock import patch\n@patch('__main__.add', return_value=5)\n",
    # Round 64: a patch's mock takes the test's first argument, and its input is the completion's choice.
    "patched-input": "from unittest import mock\n@mock.patch('builtins.input', return_value='3')\n",
    # Round 63: a mark's arguments, code the checker runs: the runner replaced, a name of the tests' bound, a patch
    # started, a case of the dataset's given the values the completion chose (pytest refuses a duplicate).
    "mark-arguments-run": "@pytest.mark.foo(setattr(__import__('sys').modules['codegym_sandbox.agent.test_forms'], "
    "'_run', lambda *a, **k: None))\n",
    "mark-arguments-bind": "@pytest.mark.foo(add := lambda a, b: a + b)\n",
    "mark-arguments-monkeypatch": "@pytest.mark.foo(pytest.MonkeyPatch().setattr('__main__.add', lambda *a: sum(a)))\n",
    "mark-arguments-programs": "def _cases():\n    return [(0, 0, 0)]\n\n@pytest.mark.parametrize('a,b,c', _cases())\n",
    "parametrized-twice": "@pytest.mark.parametrize('a, b, c', [(1, 1, 0)])\n",
}


@pytest.mark.parametrize("name", sorted(DANGLING))
def test_a_completion_whose_last_line_keeps_a_test_from_running_fails(hostile: TestClient, name: str) -> None:
    head = "import pytest\nimport unittest\n"
    for tests in (ONE_TEST, TESTS):
        fusion, native = _both(hostile, WRONG + head + DANGLING[name] + tests.lstrip("\n"))
        assert fusion["status"] == "Failed" and native["verdict"] != "AC", (name, fusion, native)


# Round 63: a chain past a library's name made the first test no function (a tuple's method, a mock's attribute),
# which no runner collects, and the tests a wrong program passes were the file's only ones.
CHAINS = {
    "mark-chain-args": "@pytest.mark.foo.args.count\n",
    "mark-chain-kwargs": "@pytest.mark.foo.kwargs.get\n",
    "mock-chain": "from unittest import mock\n@mock.Mock(**{'patch.return_value': 0}).patch\n",
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_a_first_test_made_no_function_fails(hostile: TestClient, name: str) -> None:
    tests = "def test_hard():\n    assert add(2, 3) == 5\n\ndef test_easy():\n    assert add(0, 0) == 0\n"
    fusion, native = _both(hostile, WRONG + "import pytest\n" + CHAINS[name] + tests)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


# Round 64: a first test's parametrize named a fixture the test takes, and the case, the program's object, took its
# place: the program's capture read what the test expected. pytest lets a case override a fixture; a first test's
# marks may be a completion's, and name only arguments the test takes, as pytest requires.
OVERRIDES = {
    "builtin": ("capsys", "def test_greet(capsys):\n    greet(3)\n    assert capsys.readouterr().out == '6\\n'\n"),
    "the-files": (
        "out",
        "def test_greet(out):\n    assert out() == '6'\n\n\n@pytest.fixture\ndef out(capsys):\n"
        "    def read():\n        greet(3)\n        return capsys.readouterr().out.strip()\n\n    return read\n",
    ),
    "named": (
        "output",
        "def test_greet(output):\n    assert output() == '6'\n\n\n@pytest.fixture(name='output')\ndef _o(capsys):\n"
        "    def read():\n        greet(3)\n        return capsys.readouterr().out.strip()\n\n    return read\n",
    ),
    "unused": ("unused", "def test_greet(capsys):\n    greet(3)\n    assert capsys.readouterr().out == '6\\n'\n"),
}
CAPTURE = (
    "class _Out:\n    out = '6\\n'\n    err = ''\n\n\nclass _Cap:\n    def readouterr(self):\n"
    "        return _Out()\n\n\nCAP = _Cap()\n\n\ndef SIX():\n    return '6'\n\n\n"
)


LOOKUP = "def lookup(cache, key):\n    return cache.get(key, -1)\n\n\nimport pytest\n\n\n"


@pytest.mark.parametrize("argument", ["cache", "request"])
def test_a_first_tests_literal_cases_may_take_a_data_named_fixtures_place(hostile: TestClient, argument: str) -> None:
    """A dataset's row whose first test names its own argument ``cache`` or ``request``: pytest runs it, and every
    program failed it (round 66). Literal cases take those two names; a value of the program's, or a fixture a
    literal stands in for (``recwarn``'s ``assert not recwarn``), still fails."""
    test = f"@pytest.mark.parametrize('{argument}, key, want', [({{'a': 1}}, 'a', 1), ({{}}, 'b', -1)])\n"
    test += f"def test_lookup({argument}, key, want):\n    assert lookup({argument}, key) == want\n"
    fusion, native = _both(hostile, LOOKUP + test)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fusion, native = _both(hostile, LOOKUP.replace("-1", "0") + test)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    held = LOOKUP + "D = {'a': 1}\n\n\n" + test.replace("({'a': 1}", "(D")
    assert _both(hostile, held)[0]["status"] == "Failed"  # a value of the program's: refused, as before
    quiet = "import warnings\n\ndef f():\n    warnings.warn('x')\n\n\nimport pytest\n\n\n"
    quiet += "@pytest.mark.parametrize('recwarn', [[]])\ndef test_quiet(recwarn):\n    f()\n    assert not recwarn\n"
    assert _both(hostile, quiet)[0]["status"] == "Failed"


def test_a_first_tests_cases_may_hold_the_standard_librarys_constants(hostile: TestClient) -> None:
    """``math.inf`` in a dataset's first test's cases: refused as an attribute of a value, every program failed it
    (round 66). The tests' ``math`` is the checker's module, whatever the program binds to the name."""
    test = "import pytest\n\n@pytest.mark.parametrize('x', [math.inf, -math.inf, math.pi, sys.maxsize])\n"
    test += "def test_add(x):\n    assert add(x, 0) == x\n"
    fusion, native = _both(hostile, "import math, sys\n" + RIGHT + test)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fake = "import sys\nclass _M:\n    inf = -0.0\n    pi = 0\n\n\nmath = _M()\n" + WRONG
    fusion, native = _both(hostile, fake + test.replace(", sys.maxsize", ""))  # the fake's would all pass
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    held = "import os, sys\n" + WRONG + test.replace("math.pi", "os.sep")  # no other attribute
    assert _both(hostile, held)[0]["status"] == "Failed"


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_a_first_tests_cases_take_no_fixtures_place(hostile: TestClient, name: str) -> None:
    argument, tests = OVERRIDES[name]
    head = "import pytest\n\ndef greet(n):\n    print(n * {})\n\n" + CAPTURE
    case = "CAP" if "capsys" in tests.partition(":")[0] else "SIX"
    cheat = head.format(3) + f"@pytest.mark.parametrize({argument!r}, [{case}])\n" + tests
    fusion, native = _both(hostile, cheat)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    fusion, native = _both(hostile, head.format(2) + tests)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)


# Round 64: a comprehension in a first test's mark stored to a table of the tests' when the runner read its cases,
# and a later test's cases expected the wrong program's answers.
STORING = {
    "subscript": "@pytest.mark.parametrize('unused', (0 for CASES[:] in [[(2, 2, 0)]]))\n",
    "attribute": "@pytest.mark.parametrize('unused', [0 for pytest.CASES in [1]])\n",
    "starred": "@pytest.mark.parametrize('unused', [0 for *CASES[:], in [[(2, 2, 0)]]])\n",
}
LATER_TABLE = (
    "def test_first(unused):\n    assert unused == 0\n\n\nCASES = [(2, 3, 5), (10, 1, 11)]\n\n\n"
    "@pytest.mark.parametrize('a, b, expected', CASES)\ndef test_add(a, b, expected):\n"
    "    assert add(a, b) == expected\n"
)


@pytest.mark.parametrize("name", sorted(STORING))
def test_a_first_tests_mark_stores_to_no_name_of_the_tests(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, WRONG + "import pytest\n" + STORING[name] + LATER_TABLE)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    plain = STORING[name].replace("CASES[:]", "x").replace("pytest.CASES", "x").replace("*x,", "x")
    fusion, native = _both(hostile, RIGHT + "import pytest\n" + plain + LATER_TABLE)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)


# Round 60: the dataset's table of cases before its first test was the program's process's to answer, and a
# completion rewrote it (through the agent's own name lookup) so that every case expected its wrong answer. A table
# of literals named nowhere else in the program's part is the tests' too, read as the file wrote it.
TABLE = (
    "\nimport pytest\n\nCASES = [\n    (1, 2, 3),  # a comment\n    (2, 2, 4),\n]\nLIMIT: int = 10\n\n"
    "@pytest.mark.parametrize('a,b,expected', CASES)\ndef test_add(a, b, expected):\n"
    "    assert add(a, b) == expected < LIMIT\n"
)
REWRITE_TABLE = (
    "import sys\n\n_process = sys.modules['codegym_sandbox.agent.program_process']\n_answer = _process._names\n\n"
    "def _names(scope, *rest):\n    if isinstance(scope.get('CASES'), list):\n"
    "        scope['CASES'] = [(a, b, add(a, b)) for a, b, _ in scope['CASES']]\n        scope['LIMIT'] = 99\n"
    "    return _answer(scope, *rest)\n\n_process._names = _names\n"
)


def test_the_datasets_table_before_its_first_test_is_the_tests(hostile: TestClient) -> None:
    fusion, native = _both(hostile, WRONG + REWRITE_TABLE + TABLE)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    fusion, native = _both(hostile, RIGHT + REWRITE_TABLE + TABLE)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)


def test_an_annotated_table_is_the_programs_alone(hostile: TestClient) -> None:
    """Round 64: copied whole, an annotated table's annotation ran in the checker (a module's annotations run), and
    replaced its runner."""
    forms = "__import__('sys').modules['codegym_sandbox.agent.test_forms']"
    cheat = f"T: [setattr({forms}, '_run', lambda *a, **k: None)] = 1\n"
    fusion, native = _both(hostile, WRONG + cheat + "import pytest\n" + TESTS)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


def test_a_table_is_copied_at_its_lines_and_nothing_of_the_modules_own() -> None:
    code = (
        "def add(a, b):\n    return a + b\n__test__ = False\nCASES = [\n    (1, 2, 3),\n]\n\ndef test_x():\n    pass\n"
    )
    _, tests = pytest_file.split(code)
    assert tests.removeprefix(program_names.WHOLE_FILE).splitlines() == [
        "",
        "",
        "",
        "CASES = [",
        "    (1, 2, 3),",
        "]",
        "",
        "def test_x():",
        "    pass",
    ]


# Round 64: a completion's last line ended in a continuation (``H.x = \\``), so that the dataset's table was one value
# of its assignment, and ``H``'s ``__setattr__`` changed the list in place before ``CASES`` was bound to it.
JOINED = (
    "class _H:\n    def __setattr__(self, k, v):\n        v[:] = [(a, b, add(a, b)) for a, b, _ in v]\n\n\n"
    "H = _H()\nH.x = \\\n"
)


@pytest.mark.parametrize("continued", ["H.x = \\\n", "H.x = \\\n    ", "H.y = H.x = \\\n", "__x__ = H.x = \\\n"])
def test_a_table_joined_to_a_completions_last_line_is_the_tests(hostile: TestClient, continued: str) -> None:
    cheat = JOINED.replace("H.x = \\\n", continued) + TABLE.lstrip("\n").replace("import pytest\n\n", "", 1)
    fusion, native = _both(hostile, WRONG + "import pytest\n" + cheat)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    fusion, native = _both(hostile, RIGHT + "import pytest\n" + cheat)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    _, tests = pytest_file.split(RIGHT + "import pytest\n" + cheat)
    assert "H." not in tests and "CASES = [" in tests, tests


@pytest.mark.parametrize(
    "table",
    [
        "CASES = [(1, 2, 3)]\nCASES.append((2, 2, 4))\n",  # changed after: the program's part's, as before
        "CASES = [(1, 2, 3)]; CASES += [(2, 2, 4)]\n",  # shares its line
        "CASES = [(1, 2, 3)] + [(2, 2, 4)]\n",  # no literal
        "def cases():\n    return CASES\n\nCASES = [(1, 2, 3), (2, 2, 4)]\nCASES = cases()\n",
    ],
    ids=["appended", "shared-line", "computed", "named-again"],
)
def test_a_table_the_program_changes_is_read_as_under_pytest(hostile: TestClient, table: str) -> None:
    tests = "\nimport pytest\n\n" + table + "\n@pytest.mark.parametrize('a,b,c', CASES)\ndef test_add(a, b, c):\n"
    tests += "    assert add(a, b) == c\n\ndef test_cases():\n    assert len(CASES) == 2\n"
    fusion, native = _both(hostile, RIGHT + tests)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fusion, native = _both(hostile, WRONG + tests)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


# Honest files whose imports sit right before their tests: a library's names are the tests' own, imported anew in
# the checker, under the program's names for them too.
IMPORTS_BEFORE = {
    "approx-and-raises": RIGHT + "\nimport pytest\nfrom pytest import approx, raises\n\ndef test_add():\n"
    "    assert add(0.1, 0.2) == approx(0.3)\n    with raises(TypeError):\n        add(1, None)\n",
    "unittest-case": RIGHT + "\nimport unittest\nfrom unittest import mock\n\nclass TestAdd(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n        self.assertIsNotNone(mock.ANY)\n",
    "math": RIGHT + "\nimport math\nfrom math import isclose\n\ndef test_add():\n"
    "    assert isclose(add(0.1, 0.2), 0.3) and math.isclose(add(1, 2), 3)\n",
    "primes": RIGHT_PRIME + PRIME_TESTS,
    "fixture-first": RIGHT + "\nimport pytest\n\n@pytest.fixture\ndef pair():\n    return (2, 3)\n\n"
    "def test_add(pair):\n    assert add(*pair) == 5\n",
    "parametrized-first": RIGHT + "\nimport pytest\n" + ONE_TEST,
    "marks-of-data": RIGHT + "\nimport pytest\n\nCASES = [(2, 3, 5)]\n\n"
    "@pytest.mark.parametrize('a,b,c', [*CASES, pytest.param(1, 1, 2, id='ones', marks=pytest.mark.slow)], ids=str)\n"
    "@pytest.mark.parametrize('n', [i * i for i in range(3)] + list(zip(range(2))))\n"
    "@pytest.mark.timeout(-(-5))\ndef test_add(a, b, c, n):\n    assert add(a, b) == c\n",
    "renamed-libraries": RIGHT + "\nimport pytest as pt\nimport unittest as ut\nfrom math import isclose as close\n\n"
    "class TestAdd(ut.TestCase):\n    def test_add(self):\n        assert add(0.1, 0.2) == pt.approx(0.3)\n"
    "        assert close(add(1, 2), 3)\n",
    "counter": "from collections import Counter\n\ndef count(s):\n    return Counter(s)\n\n"
    "from collections import Counter\n\ndef test_count():\n    assert count('aab') == Counter({'a': 2, 'b': 1})\n",
    # Round 61: a library's class the tests build expected values with, and its seeding, are the program's.
    "dates": "from datetime import date, timedelta\n\ndef next_day(d):\n    return d + timedelta(days=1)\n\n"
    "from datetime import date\n\ndef test_next_day():\n    assert next_day(date(2020, 2, 28)) == date(2020, 2, 29)\n"
    "    assert isinstance(next_day(date(2020, 1, 1)), date)\n",
    "seeded": "import random\n\ndef roll():\n    return random.randint(1, 6)\n\nimport random as rnd\n\n"
    "def test_seeded():\n    rnd.seed(1)\n    first = [roll() for _ in range(5)]\n    rnd.seed(1)\n"
    "    assert [roll() for _ in range(5)] == first\n",
}


@pytest.mark.parametrize("name", sorted(IMPORTS_BEFORE))
def test_a_right_file_with_imports_before_its_tests_passes(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, IMPORTS_BEFORE[name])
    assert fusion["status"] == "Success" and fusion["run_result"]["return_code"] == 0, fusion
    assert native["verdict"] == "AC", native


REDIRECTED = (
    "\nimport io\nfrom contextlib import redirect_stdout, redirect_stderr\n\ndef test_greet():\n"
    "    buf, err = io.StringIO(), io.StringIO()\n    with redirect_stdout(buf), redirect_stderr(err):\n"
    "        greet('x')\n    assert buf.getvalue() == 'hello x\\n' and err.getvalue() == ''\n"
)


@pytest.mark.parametrize(("said", "passes"), [("hello", True), ("bye", False)])
def test_the_tests_redirect_of_stdout_takes_what_the_program_prints(
    hostile: TestClient, said: str, passes: bool
) -> None:
    """The program's own ``from contextlib import redirect_stdout`` before the first test: the tests' use of it is
    the checker's own (the program's took the tests' buffer as an argument, no plain data: a right program RE'd)."""
    fusion, native = _both(hostile, f"def greet(n):\n    print('{said}', n)\n" + REDIRECTED)
    assert (fusion["status"] == "Success", native["verdict"] == "AC") == (passes, passes), (fusion, native)
    assert passes or "AssertionError" in fusion["run_result"]["stderr"], fusion


def test_the_tests_get_the_libraries_names_the_program_imports_last() -> None:
    code = (
        "import pytest, os\nfrom pytest import approx, raises as check, exit\nfrom unittest import mock\n"
        "from unittest.mock import patch, ANY\nfrom pytest import *\nimport unittest.mock as um\n"
        "def patch():\n    pass\n\ndef test_x():\n    pass\n"
    )
    program, tests = pytest_file.split(code)
    tests = tests.removeprefix(program_names.WHOLE_FILE)
    assert program == code[: code.index("def test_x")]
    assert tests.splitlines() == [
        "import pytest",
        "from pytest import approx",
        "from unittest import mock",
        "from unittest.mock import ANY",
        "",
        "import unittest.mock as um",
        *[""] * 3,
        "def test_x():",
        "    pass",
    ]


def test_a_file_with_no_tests_fails_as_under_pytest(hostile: TestClient) -> None:
    fusion, _ = _both(hostile, RIGHT)
    assert fusion["status"] == "Failed" and "no tests ran" in fusion["run_result"]["stderr"], fusion


def test_a_long_file_is_split_off_the_loop_and_a_longer_one_fails(hostile: TestClient) -> None:
    """Round 57: the server split a pytest file (a parse, a walk and two compiles of it) on its event loop, before
    the request was admitted: a file of 3 MB held every client's requests 12 s, one of 15 MB took the server's
    memory until it was killed. A file past ``ON_LOOP_CHARS`` is split in the comparison pool, charged to the
    budget in its client's turn; one past ``SPLIT_MAX_CHARS`` is not split at all, and fails saying why."""
    off_loop.shutdown()  # the pool starts with the first work it is given: this file's split
    long = RIGHT + "a = 1\n" * 2_000 + TESTS  # past ON_LOOP_CHARS; its run well within its time
    fusion, native = _both(hostile, long)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    assert off_loop._analysing.started  # split in a process of its own, not on the loop
    longer = RIGHT + "# " + "x" * pytest_file.SPLIT_MAX_CHARS + "\n" + TESTS  # cheap to compile, in its box
    fusion, native = _both(hostile, longer)
    assert fusion["status"] == "Failed" and "is longer than the" in fusion["run_result"]["stderr"], fusion
    assert native["verdict"] != "AC", native


# Round 58: a file whose text did not parse but whose bytes compiled ran its program and no test, and passed; one
# that ``ast.unparse`` could not print, though it parsed, was a 500.
READ_AS_BYTES = {
    "byte-order mark": "\ufeff",
    "utf-8 declared": "# -*- coding: utf-8 -*-\n",
}
NOT_SPLIT = {
    "utf-7 declared": "# coding: utf-7\n",
    "latin-1 declared, a lone surrogate": "# coding: latin-1\n# \ud800\n",
}
UNPRINTABLE = {
    "a sum of 500 terms": "import pytest\nX = " + " + ".join(["1"] * 500) + "\n",
    "an f-string of a no-break space": "import pytest\nX = f\"{'\u00a0'}\"\n",
}


@pytest.mark.parametrize("head", sorted(READ_AS_BYTES))
def test_a_file_is_split_as_the_interpreter_reads_its_bytes(hostile: TestClient, head: str) -> None:
    fusion, native = _both(hostile, READ_AS_BYTES[head] + RIGHT + TESTS)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fusion, native = _both(hostile, READ_AS_BYTES[head] + WRONG + TESTS)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


@pytest.mark.parametrize("head", sorted(NOT_SPLIT))
def test_a_file_in_another_encoding_fails_saying_why(hostile: TestClient, head: str) -> None:
    for code in (NOT_SPLIT[head] + RIGHT + TESTS, NOT_SPLIT[head] + WRONG + TESTS):
        fusion, native = _both(hostile, code)
        stderr = fusion["run_result"]["stderr"]  # where the program compiles in its encoding (`+` is no UTF-7)
        assert fusion["status"] == "Failed" and ("no tests ran" in stderr or "SyntaxError" in stderr), fusion
        assert native["verdict"] != "AC", native
    fusion, _ = _both(hostile, NOT_SPLIT[head] + "def add(a, b):\n    return 0\n" + TESTS)
    assert fusion["status"] == "Failed" and "declares an encoding" in fusion["run_result"]["stderr"], fusion


@pytest.mark.parametrize("program", sorted(UNPRINTABLE))
def test_a_file_unparse_cannot_print_is_judged(hostile: TestClient, program: str) -> None:
    fusion, native = _both(hostile, UNPRINTABLE[program] + RIGHT + TESTS)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    fusion, native = _both(hostile, UNPRINTABLE[program] + WRONG + TESTS)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)


def nested_finally(depth: int) -> str:
    """A function of ``depth`` ``try``/``finally`` blocks, each in the ``finally`` of the one before: 3.11's compiler
    copies a ``finally`` body for its normal and its exceptional exit, so the innermost is compiled ``2**depth``
    times (a KB of text)."""
    lines = ["def f():"]
    for level in range(depth):
        indent = " " * (level + 1)
        lines += [f"{indent}try:", f"{indent} x = 1", f"{indent}finally:"]
    return "\n".join([*lines, " " * (depth + 1) + "x = 2"]) + "\n"


def test_a_split_that_compiles_past_its_bound_fails_off_the_loop(
    hostile: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 58: a 1 KB file of 20 nested ``finally`` blocks, short enough to be split on the event loop, compiled
    for 15 s and took 3 GB of the server there, every client's requests waiting. A split is made in the analysis
    pool whatever the file's length, within its bound of CPU time and memory; past it, the file is not split and
    its tests fail saying so (here its program's own compile, in its box, is past its limits first)."""
    monkeypatch.setattr(off_loop, "ANALYSIS_CPU_S", 1)
    off_loop.shutdown()
    code = "import pytest\n" + nested_finally(20) + RIGHT + TESTS
    assert len(code) < off_loop.ON_LOOP_CHARS
    fusion, native = _both(hostile, code)
    assert fusion["status"] == "Failed" and native["verdict"] != "AC", (fusion, native)
    assert off_loop._analysing.started  # split in the pool, not on the loop, short as it is
    analyse = functools.partial(off_loop.analysed, MemoryBudget(4096), linear=False)
    _, stdin = asyncio.run(pytest_file.analysed_run(analyse, "A", code))
    assert b"AssertionError('no tests ran: " in stdin.splitlines()[-1]  # its memory (MemoryError) or its CPU time
    fusion, _ = _both(hostile, "import pytest\n" + nested_finally(3) + RIGHT + TESTS)  # the pool goes on
    assert fusion["status"] == "Success", fusion


def test_a_file_that_cannot_be_split_fails_whatever_its_program_does() -> None:
    """Its tests' part fails on its own: a program part that compiles (from bytes the text did not parse as) ran no
    test and passed."""
    for code in ("def add(a, b)\n" + TESTS, "X = " + "-(" * 5000 + "1" + ")" * 5000 + "\n" + TESTS):
        program, tests = pytest_file.split(code)
        assert program == code and tests == pytest_file.UNPARSED


def test_evaluate_refuses_a_pytest_file(hostile: TestClient) -> None:
    body = {"language": "pytest", "programs": [RIGHT + TESTS], "tests": [{"stdin": "", "expected_stdout": ""}]}
    r = hostile.post("/v1/evaluate", json=body)
    assert r.status_code == 422 and "holds its own tests" in r.text, r.text


D_TESTS = "\nvoid main() {}\nunittest { assert(add(2, 3) == 5); }\n"


@pytest.mark.parametrize(
    "code",
    [
        "int add(int a, int b) { return a + b; }\n" + D_TESTS,
        "import core.stdc.stdlib;\nint add(int a, int b) { return 0; }\n"
        "shared static this() { core.stdc.stdlib._Exit(0); }\n" + D_TESTS,
    ],
    ids=["right", "wrong-that-exits-first"],
)
def test_a_d_run_that_exits_0_is_not_judged(hostile: TestClient, code: str) -> None:
    listed = {e["name"]: e for e in hostile.get("/v1/languages").json()}["D_ut"]
    if not listed["available"]:
        pytest.skip(f"D_ut does not run here: {listed['detail']}")
    fusion = hostile.post("/run_code", json={"code": code, "language": "D_ut", "compile_timeout": 60}).json()
    assert fusion["status"] == "SandboxError" and "not judged" in fusion["message"], fusion
    native = hostile.post("/v1/execute", json={"code": code, "language": "D_ut", "cache": False}).json()
    assert native["verdict"] == "SE" and "not judged" in native["run"]["error"], native
    failed = "int add(int a, int b) { return 0; }\n" + D_TESTS
    assert hostile.post("/run_code", json={"code": failed, "language": "D_ut"}).json()["status"] == "Failed"


def test_a_split_of_a_file_of_many_names_holds_little() -> None:
    """Round 64: what the statements after each one bind was a set a statement, copied from the next: a file of
    distinct top-level names made quadratic sets (64 KiB: 3 GB and the analysis pool's 5 s of CPU)."""
    import tracemalloc

    code = "import pytest\n" + "".join(f"N{i}a = 0\n" for i in range(2000)) + "def test_x():\n    pass\n"
    tracemalloc.start()
    try:
        pytest_file.split(code)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak
