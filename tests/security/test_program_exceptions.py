"""A program's exception reaches the tests as what it is: its own class, a library's, its arguments.

The checker makes a class of its own for each exception type of the program's (``program_errors.ExceptionClasses``)
from the lineage the program's process answers: the tests' ``except InvalidInput`` (a name they take from the
program) catches the program's ``InvalidInput``, ``except json.JSONDecodeError`` a ``JSONDecodeError``, and
``e.args`` and ``e.code`` are the program's. Each of these was an honest program's RE before. What the program
answers is its word only: it never makes the tests' own exceptions, nor a test runner's (``unittest.SkipTest``).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from .checker_names import FORGE


def _verdicts(client: TestClient, programs: list[str], tests: str) -> list[str]:
    body = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}], "limits": {"timeout_s": 3}}
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return [p["verdict"] for p in results]


OWN = (
    "class InvalidInput(ValueError):\n"
    "    def __init__(self, value, code=3):\n"
    "        super().__init__(f'bad input: {value!r}')\n"
    "        self.code = code\n"
)


ERRORS = "class Error(Exception):\n    pass\nclass Specific(Error):\n    pass\n"


@pytest.mark.parametrize(
    ("tests", "right", "wrong"),
    [
        (
            "try:\n    parse('x')\n    assert False, 'no error'\nexcept InvalidInput as e:\n"
            "    assert str(e) == \"bad input: 'x'\" and e.code == 3 and type(e).__name__ == 'InvalidInput'\n",
            OWN + "def parse(s):\n    raise InvalidInput(s)\n",
            OWN + "def parse(s):\n    raise ValueError(s)\n",
        ),
        (
            "import json\ntry:\n    parse('{')\n    assert False, 'no error'\nexcept json.JSONDecodeError as e:\n"
            "    assert e.pos == 1\n",
            "import json\ndef parse(s):\n    return json.loads(s)\n",
            "def parse(s):\n    raise ValueError('Expecting value: line 1 column 2 (char 1)')\n",
        ),
        (
            "try:\n    parse({})\n    assert False, 'no error'\n"
            "except KeyError as e:\n    assert e.args == ('name',)\n",
            "def parse(d):\n    return d['name']\n",
            "def parse(d):\n    raise KeyError('other')\n",
        ),
        (
            "class Base(Exception):\n    pass\n\ntry:\n    parse(1)\nexcept Base:\n    pass\nexcept Error as e:\n"
            "    assert isinstance(e, Error) and issubclass(Specific, Error)\n",
            ERRORS + "def parse(x):\n    raise Specific(x)\n",
            ERRORS + "def parse(x):\n    raise Exception(x)\n",
        ),
    ],
    ids=["own-class", "library-class", "arguments", "subclass"],
)
def test_the_tests_catch_the_programs_exception_as_what_it_is(
    hostile: TestClient, tests: str, right: str, wrong: str
) -> None:
    got = _verdicts(hostile, [right, wrong], tests)
    assert got[0] == "AC" and got[1] in ("WA", "RE"), got


def test_a_program_cannot_raise_the_tests_own_exception(hostile: TestClient) -> None:
    """The tests' ``Signal`` is theirs: a program's class of that name (and module) is another class."""
    tests = (
        "class Signal(Exception):\n    pass\n\n"
        "try:\n    parse(1)\n    raise Signal()\n"
        "except Signal:\n    raise AssertionError('parse must raise its own error')\n"
        "except Exception:\n    pass\n"
    )
    program = "class Signal(Exception):\n    pass\nSignal.__module__ = '__main__'\ndef parse(x):\n    raise Signal()\n"
    assert _verdicts(hostile, [program], tests) == ["AC"]  # caught as the program's, not as the tests' Signal


# A program that makes the agent in its process answer a unittest ``SkipTest`` for its error (``FORGE`` finds the
# agent's modules; here the error's lineage is changed as it is written).
SKIP = (
    FORGE.split("\n\ndef _refs")[0]
    + """
_process = _sys.modules.get("codegym_sandbox.agent.program_process")
if _process is not None:
    _lineage = _process._lineage
    _process._lineage = lambda kind: [["unittest.case", "SkipTest"], *_lineage(Exception)]


def solve(x):
    raise Exception("skip me")
"""
)


@pytest.mark.parametrize("runner", ["unittest", "plain"])
def test_a_programs_word_never_makes_a_test_runners_exception(hostile: TestClient, runner: str) -> None:
    tests = {
        "unittest": (
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n"
            "        self.assertEqual(solve(1), 2)\n\nunittest.main()\n"
        ),
        "plain": "import unittest\ntry:\n    solve(1)\nexcept unittest.SkipTest:\n    pass\n",
    }[runner]
    (verdict,) = _verdicts(hostile, [SKIP], tests)
    assert verdict in ("RE", "WA"), verdict


@pytest.mark.parametrize(
    ("program", "tests"),
    [
        ("def f(x):\n    raise ValueError(0.5, 2**60)\n", "assert e.args == (0.5, 2**60), e.args\n"),
        (
            "class Funds(Exception):\n    def __init__(self, balance, amount):\n"
            "        super().__init__(f'{balance} < {amount}')\n        self.amount = amount\n"
            "def f(x):\n    raise Funds(10.0, 20.5)\n",
            "assert e.amount == 20.5 and str(e) == '10.0 < 20.5', (e.amount, str(e))\n",
        ),
        (
            "class Coded(Exception):\n    def __init__(self, code):\n        self.code = code\n"
            "    def __str__(self):\n        return f'error code {self.code}'\ndef f(x):\n    raise Coded(x)\n",
            "assert str(e) == 'error code 1' and e.code == 1, str(e)\n",
        ),
    ],
    ids=["numbers", "attributes", "own-str"],
)
def test_an_exceptions_values_and_text_are_the_programs(hostile: TestClient, program: str, tests: str) -> None:
    caught = (
        "try:\n    f(1)\n    raise AssertionError('no error')\nexcept Exception as e:\n    "
        + tests.replace("\n", "\n    ").rstrip()
        + "\n"
    )
    assert _verdicts(hostile, [program], caught) == ["AC"]


def test_a_program_that_makes_a_type_per_raise_makes_few_classes_in_the_checker(hostile: TestClient) -> None:
    """Each raise of a new type of the program's would be a class in the checker: past a few hundred, a type is
    its nearest known class, still caught by its builtin base."""
    program = (
        "def f(i):\n    raise type(f'E{i}', (type(f'B{i}', (KeyError,), {}),), {})(i)\ndef made():\n    return 0\n"
    )
    tests = (
        "import gc\nfor i in range(2000):\n    try:\n        f(i)\n"
        "    except KeyError as e:\n        assert e.args == (i,)\n"
        "assert len([k for k in gc.get_objects() if isinstance(k, type) and k.__module__ == 'solution']) <= 256\n"
    )
    assert _verdicts(hostile, [program], tests) == ["AC"]


@pytest.mark.parametrize(
    ("program", "tests"),
    [
        (
            "class ConfigError(KeyError, ValueError):\n    pass\n",
            "try:\n    get({}, 'a')\n    raise AssertionError('no error')\nexcept ValueError as e:\n"
            "    assert isinstance(e, KeyError) and isinstance(e, ConfigError)\n",
        ),
        (
            "class AppError(Exception):\n    pass\nclass ConfigError(AppError, KeyError):\n    pass\n",
            "assert issubclass(ConfigError, AppError)\ntry:\n    get({}, 'a')\n    raise AssertionError('no error')\n"
            "except AppError as e:\n    assert isinstance(e, KeyError)\n",
        ),
        (
            "class ValidationError(ValueError):\n    def __init__(self, field, problems):\n"
            "        super().__init__(f'{field}: {problems}')\n        self.field, self.problems = field, problems\n"
            "        self.handler = print\n"
            "class ConfigError(ValidationError):\n    pass\n",
            "try:\n    get({}, ['age', {'x': (1, 2)}])\nexcept ValidationError as e:\n"
            "    assert e.field == 'age' and e.problems == {'x': (1, 2)}, vars(e)\n",
        ),
    ],
    ids=["two-builtin-bases", "own-and-builtin-bases", "plain-attributes"],
)
def test_an_exceptions_bases_and_attributes_are_all_there(hostile: TestClient, program: str, tests: str) -> None:
    getter = (
        "def get(d, k):\n    if isinstance(k, list):\n        raise ConfigError(*k)\n"
        "    if k not in d:\n        raise ConfigError(k)\n    return d[k]\n"
    )
    assert _verdicts(hostile, [program + getter], tests) == ["AC"]


def test_a_unicode_error_arrives_as_itself(hostile: TestClient) -> None:
    program = "def dec(b):\n    return b.decode('utf-8')\n"
    tests = (
        "try:\n    dec(b'\\xff')\n    raise AssertionError('no error')\n"
        "except UnicodeDecodeError as e:\n    assert e.start == 0\n"
    )
    assert _verdicts(hostile, [program], tests) == ["AC"]


LONG = (
    FORGE.split("\n\ndef _refs")[0]
    + """
_process = _sys.modules.get("codegym_sandbox.agent.program_process")
if _process is not None:
    _process._lineage = lambda kind: [["m", f"E{i}"] for i in range(3000)] + [["builtins", "ValueError"]] * 3000


def solve(x):
    raise ValueError("long")
"""
)


def test_a_forged_lineage_costs_the_checker_little(hostile: TestClient) -> None:
    tests = "for _ in range(3):\n    try:\n        solve(1)\n    except ValueError:\n        pass\n"
    assert _verdicts(hostile, [LONG], tests) == ["AC"]


# argparse's way to refuse its arguments: print the usage, exit 2. A test of a CLI program expects that exit.
CLI = (
    "import argparse\n"
    "def main(argv):\n"
    "    parser = argparse.ArgumentParser(prog='count')\n"
    "    parser.add_argument('n', type=int)\n"
    "    return parser.parse_args(argv).n * 2\n"
)
LENIENT = "def main(argv):\n    return int(argv[0]) * 2 if argv and argv[0].isdigit() else 0\n"


@pytest.mark.parametrize(
    "tests",
    [
        "import pytest\n\ndef test_refused():\n    with pytest.raises(SystemExit) as e:\n        main(['x'])\n"
        "    assert e.value.code == 2\n\ndef test_count():\n    assert main(['3']) == 6\n",
        "try:\n    main([])\n    raise AssertionError('no exit')\nexcept SystemExit as e:\n    assert e.code == 2\n"
        "assert main(['3']) == 6\n",
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_refused(self):\n"
        "        with self.assertRaises(SystemExit) as e:\n            main(['x'])\n"
        "        self.assertEqual(e.exception.code, 2)\n",
    ],
    ids=["pytest-raises", "except", "unittest"],
)
def test_the_tests_catch_the_programs_exit(hostile: TestClient, tests: str) -> None:
    # Its exit ended the program's process, and every CLI program that refused bad arguments as asked failed.
    assert _verdicts(hostile, [CLI, LENIENT], tests) == ["AC", "WA"]


@pytest.mark.parametrize(
    "tests",
    [
        "assert solve(1) == 2\n",  # a script: the program's exit is not its end
        "import sys\nassert solve(1) == 2\nsys.exit(0)\n",
        "def test_solve():\n    assert solve(1) == 2\n",
        "try:\n    solve(1)\nexcept SystemExit:\n    raise\n",  # passed on as it is: still the program's
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n"
        "        self.assertEqual(solve(1), 2)\n\nunittest.main()\n",
    ],
    ids=["script", "script-that-exits", "pytest", "passed-on", "unittest"],
)
@pytest.mark.parametrize("code", ["0", "None", "''"])
def test_the_programs_exit_never_ends_the_tests_as_passed(hostile: TestClient, tests: str, code: str) -> None:
    program = f"import sys\ndef solve(x):\n    sys.exit({code})\n"
    (verdict,) = _verdicts(hostile, [program], tests)
    assert verdict in ("WA", "RE"), verdict


def test_the_programs_exit_keeps_its_code_and_class(hostile: TestClient) -> None:
    # The code the tests read is the exit's own (set after it was made, too), and an exit of the program's class is
    # one the tests catch by that class, as beside the program.
    tests = (
        "import pytest\n\ndef test_bad():\n    with pytest.raises(SystemExit) as e:\n        main(['x'])\n"
        "    assert e.value.code == 2\n\ndef test_quit():\n    with pytest.raises(Quit):\n        main(['quit'])\n"
    )
    quit_ = "class Quit(SystemExit):\n    pass\n"
    right = quit_ + "def main(argv):\n    if argv == ['quit']:\n        raise Quit(0)\n    e = SystemExit(0)\n"
    right += "    e.code = 2\n    raise e\n"
    wrong = quit_ + "def main(argv):\n    if argv == ['quit']:\n        raise Quit(0)\n    e = SystemExit(2)\n"
    wrong += "    e.code = 0\n    raise e\n"
    assert _verdicts(hostile, [right, wrong], tests) == ["AC", "WA"]


def test_an_xfail_that_expects_an_exit_takes_the_programs(hostile: TestClient) -> None:
    tests = (
        "import pytest\n\n@pytest.mark.xfail(raises=SystemExit)\ndef test_known_bug():\n    run('x')\n\n"
        "def test_ok():\n    assert run('y') == 1\n"
    )
    program = "import sys\ndef run(cmd):\n    if cmd == 'x':\n        sys.exit(3)\n    return 1\n"
    assert _verdicts(hostile, [program], tests) == ["AC"]
