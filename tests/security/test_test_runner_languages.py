"""The languages whose run is a test run (SandboxFusion's ``pytest`` and ``D_ut``) never pass on an exit status.

The program's code runs in the process that runs the tests, so the status of that process is the program's to
set: ending it with 0 before the tests ran or after they failed passed a wrong program on ``/run_code`` and
``/v1/execute``. A ``pytest`` file is judged by the assert runner (its program's part in the program's process,
its tests in the checker: ``codegym_sandbox.pytest_file``); a ``D_ut`` run that exits 0 is not judged (SE).
"""

from __future__ import annotations

from typing import Any

import pytest
from codegym_sandbox import pytest_file
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
    fusion = client.post("/run_code", json={"code": code, "language": "pytest"})
    native = client.post("/v1/execute", json={"code": code, "language": "pytest", "cache": False})
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


@pytest.mark.parametrize("name", sorted(BORROWED))
def test_no_statement_of_the_program_is_the_tests_code(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, BORROWED[name])
    assert fusion["status"] == "Failed" and fusion["run_result"]["return_code"] != 0, fusion
    assert native["verdict"] != "AC", native
    program, tests = pytest_file.split(BORROWED[name])
    assert program == BORROWED[name][: len(program)]
    assert set(tests.split("def test_")[0].split()) <= {"import", "pytest"}, tests


# Honest files whose imports sit right before their tests: the test libraries' names are the tests' own, the
# others the program's (a stand-in of its `isclose` answers as the checker's would).
IMPORTS_BEFORE = {
    "approx-and-raises": RIGHT + "\nimport pytest\nfrom pytest import approx, raises\n\ndef test_add():\n"
    "    assert add(0.1, 0.2) == approx(0.3)\n    with raises(TypeError):\n        add(1, None)\n",
    "unittest-case": RIGHT + "\nimport unittest\nfrom unittest import mock\n\nclass TestAdd(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n        self.assertIsNotNone(mock.ANY)\n",
    "math": RIGHT + "\nimport math\nfrom math import isclose\n\ndef test_add():\n"
    "    assert isclose(add(0.1, 0.2), 0.3) and math.isclose(add(1, 2), 3)\n",
    "primes": RIGHT_PRIME + PRIME_TESTS,
}


@pytest.mark.parametrize("name", sorted(IMPORTS_BEFORE))
def test_a_right_file_with_imports_before_its_tests_passes(hostile: TestClient, name: str) -> None:
    fusion, native = _both(hostile, IMPORTS_BEFORE[name])
    assert fusion["status"] == "Success" and fusion["run_result"]["return_code"] == 0, fusion
    assert native["verdict"] == "AC", native


def test_the_tests_get_only_plain_names_of_the_test_libraries() -> None:
    code = (
        "import pytest, os\nfrom pytest import approx, raises as check, exit\nfrom unittest import mock\n"
        "from unittest.mock import patch, ANY\nfrom pytest import *\nimport unittest.mock as um\n"
        "def patch():\n    pass\n\ndef test_x():\n    pass\n"
    )
    program, tests = pytest_file.split(code)
    assert program == code[: code.index("def test_x")]
    assert tests.splitlines() == [
        "import pytest",
        "from pytest import approx",
        "from unittest import mock",
        "from unittest.mock import ANY",
        *[""] * 5,
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
    long = RIGHT + "a = 1\n" * 20_000 + TESTS
    fusion, native = _both(hostile, long)
    assert fusion["status"] == "Success" and native["verdict"] == "AC", (fusion, native)
    assert off_loop._analysing.processes is not None  # split in a process of its own, not on the loop
    longer = RIGHT + "a = 1\n" * (pytest_file.SPLIT_MAX_CHARS // 6) + TESTS
    fusion, native = _both(hostile, longer)
    assert fusion["status"] == "Failed" and "is longer than the" in fusion["run_result"]["stderr"], fusion
    assert native["verdict"] != "AC", native


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
