"""How the tests end, and what an xfail mark takes, never accept a wrong program that pytest fails.

Only ``unittest.main()``'s own exit says the cases ran: an exit of the tests after a runner of their own, after
a ``unittest.main()`` that ran nothing (tests that use pytest), or after ``pytest.main()``, leaves the cases to
the checker. An assertion that failed in a fixture is its test's error, which ``xfail(raises=...)`` matches
against the assertion, never against the error that carries it. Each row: the tests, and what real pytest gives
a wrong and a right program on the same file (a wrong one: a failure or an error, never a pass).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from .test_test_forms import RIGHT, WRONG, _verdicts

_P = "import pytest, unittest, sys\n"
_CASE = "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
_RAISES = "@pytest.mark.xfail(raises=RuntimeError, reason='known')\n"


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        # An exit that says "passed", where nothing ran the cases.
        (_P + _CASE + "\nif __name__ == '__main__':\n    sys.exit(pytest.main([__file__]))\n", ["WA", "AC"]),
        (_P + _CASE + "\nif __name__ == '__main__':\n    unittest.main()\n    sys.exit(0)\n", ["WA", "AC"]),
        (
            "import unittest, sys\n" + _CASE + "\nif __name__ == '__main__':\n"
            "    unittest.TextTestRunner().run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
            "    sys.exit(0)\n",
            ["WA", "AC"],
        ),
        # A fixture's assertion, carried as an error of the test, under xfail(raises=RuntimeError).
        (
            _P
            + "@pytest.fixture\ndef checked():\n    assert add(1, 2) == 3\n\n"
            + _RAISES
            + "def test_x(checked):\n    raise RuntimeError('known')\n",
            ["WA", "AC"],
        ),
        (
            _P + "@pytest.fixture(autouse=True)\ndef checked():\n    yield\n    assert add(1, 2) == 3\n\n"
            "class T(unittest.TestCase):\n    "
            + _RAISES.replace("\n", "\n    ")
            + "def test_x(self):\n        raise RuntimeError('known')\n",
            ["WA", "AC"],
        ),
    ],
    ids=[
        "sys-exit-pytest-main",
        "unittest-main-then-exit",
        "text-runner-then-exit",
        "xfail-raises-fixture",
        "xfail-raises-case-fixture-teardown",
    ],
)
def test_no_exit_or_xfail_accepts_a_wrong_program_that_pytest_fails(
    hostile: TestClient, tests: str, verdicts: list[str]
) -> None:
    got = _verdicts(hostile, tests, [WRONG, RIGHT])
    assert got[0] != "AC" and got[1] == verdicts[1]
