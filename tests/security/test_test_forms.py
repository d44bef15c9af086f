"""Assert tests in pytest's and unittest's forms are run as their runners would run them: on every backend.

Test code that only defines ``test_*`` functions ran nothing, and every program passed it; test code that ends in
``unittest.main()`` found no case in the checker's scope and ended in ``SystemExit``, and every program failed.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

WRONG, RIGHT = "def add(a, b):\n    return 0\n", "def add(a, b):\n    return a + b\n"
CASE = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
)
FORMS = {
    "pytest": "def test_add():\n    assert add(1, 2) == 3\n\ndef test_neg():\n    assert add(-1, -2) == -3\n",
    "unittest-main": CASE + "\nunittest.main()\n",
    "unittest-if-main": CASE + "\nif __name__ == '__main__':\n    unittest.main()\n",
    "unittest-no-exit": CASE + "\nunittest.main(exit=False)\n",
    "unittest-no-main": CASE,
    "exit-at-the-end": "import sys\nassert add(1, 2) == 3\nsys.exit(0)\n",
    "called-helper": "def test_helper(x):\n    assert add(x, 1) == x + 1\n\ntest_helper(2)\n",
}


def _verdicts(client: TestClient, tests: str, programs: list[str]) -> list[str]:
    body: dict[str, Any] = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    return [p["verdict"] for p in r.json()["results"]]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_passes_the_right_program_only(hostile: TestClient, form: str) -> None:
    # Alone (the right program) and in one test series (both: one checker judges them one after the other).
    assert _verdicts(hostile, FORMS[form], [RIGHT]) == ["AC"], form
    assert _verdicts(hostile, FORMS[form], [WRONG, RIGHT]) == ["WA", "AC"], form


def test_a_test_function_that_needs_a_fixture_passes_nothing(hostile: TestClient) -> None:
    tests = "def test_add(numbers):\n    assert add(*numbers) == 3\n"
    assert _verdicts(hostile, tests, [RIGHT, WRONG]) == ["RE", "RE"]


def test_a_program_that_exits_passes_nothing(hostile: TestClient) -> None:
    """A ``SystemExit`` the tests did not raise (the program's, in a call) is no end of the tests."""
    exits = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    assert _verdicts(hostile, FORMS["unittest-main"], [exits]) != ["AC"]
    assert _verdicts(hostile, FORMS["pytest"], [exits]) != ["AC"]
