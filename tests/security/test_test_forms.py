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
    "pytest-class": "class TestAdd:\n    def setup_method(self, method):\n        self.one = 1\n\n"
    "    def test_add(self):\n        assert add(self.one, 2) == 3\n",
    "functions-then-unittest-main": "import unittest\n\ndef test_add():\n    assert add(1, 2) == 3\n\n"
    "if __name__ == '__main__':\n    unittest.main()\n",
    "functions-then-exit": "import sys\n\ndef test_add():\n    assert add(1, 2) == 3\n\nsys.exit(0)\n",
    "pytest-class-table-and-setup": "class TestAdd:\n    test_cases = [((1, 2), 3)]\n\n    @classmethod\n"
    "    def setup_class(cls):\n        cls.want = 3\n\n    def test_all(self):\n"
    "        for args, want in self.test_cases:\n            assert add(*args) == want == self.want\n",
    "pytest-class-inherited": "class Base:\n    def test_add(self):\n        assert add(1, 2) == 3\n\n"
    "class TestAdd(Base):\n    pass\n",
    # What pytest collects in a class (its Test* classes, unittest's cases), and by __test__ rather than a name.
    "pytest-nested-class": "class TestOuter:\n    def test_ok(self):\n        assert True\n\n"
    "    class TestInner:\n        def test_add(self):\n            assert add(1, 2) == 3\n",
    "pytest-nested-deep": "class TestA:\n    class TestB:\n        class TestC:\n            def test_add(self):\n"
    "                assert add(1, 2) == 3\n",
    "dunder-test-class": "class Checks:\n    __test__ = True\n\n    def test_add(self):\n"
    "        assert add(1, 2) == 3\n",
    "case-in-a-pytest-class": "import unittest\n\nclass TestOuter:\n    class Inner(unittest.TestCase):\n"
    "        def test_add(self):\n            self.assertEqual(add(1, 2), 3)\n",
    # A Test class its own methods name (a constant of its, super(), isinstance): pytest collects it all the same.
    "class-named-in-its-methods": "class TestF:\n    K = 1\n\n    def test_a(self):\n"
    "        assert add(TestF.K, 2) == 3\n",
    "class-named-by-super": "class Base:\n    def setup_method(self):\n        self.v = 1\n\nclass TestF(Base):\n"
    "    def setup_method(self):\n        super(TestF, self).setup_method()\n\n    def test_a(self):\n"
    "        assert add(self.v, 2) == 3\n",
    "class-attribute-set-after": "class TestF:\n    def test_a(self):\n        assert add(self.K, 2) == 3\n\n"
    "TestF.K = 1\n",
    "data-class-named-test": "class TestA:\n    class test_data:\n        x = 1\n\n    def test_a(self):\n"
    "        assert add(self.test_data.x, 2) == 3\n",
    "helper-said-no-test": "def test_helper(x):\n    return add(x, 1)\n\ntest_helper.__test__ = False\n\n"
    "def test_add():\n    assert test_helper(2) == 3\n",
    "unittest-main-shared-state": "import unittest\nlog = []\n\nclass T(unittest.TestCase):\n    def test_a(self):\n"
    "        log.append(add(1, 2))\n        self.assertEqual(log, [3])\n\n"
    "if __name__ == '__main__':\n    unittest.main()\n",
    "generator-the-code-drives": "def test_cases():\n    yield (1, 2), 3\n\nfor args, want in test_cases():\n"
    "    assert add(*args) == want\n",
    "expected-failure": "import unittest\n\nclass T(unittest.TestCase):\n    @unittest.expectedFailure\n"
    "    def test_add(self):\n        self.assertNotEqual(add(1, 2), 3)\n",
    "file-of-main": "def test_add():\n    assert add(1, 2) == 3\n\nif __name__ == '__main__':\n    print(__file__)\n",
    # Test functions the code names without running them (a list of them): a runner still collects each.
    "named-never-called": "def test_add():\n    assert add(1, 2) == 3\n\nTESTS = [test_add]\n",
    "named-in-a-block": 'if True:\n    def test_add():\n        "adds"\n        assert add(1, 2) == 3\n'
    "    ALL = (test_add,)\n",
    # pytest's parametrize, on a function, stacked, with pytest.param, on a class; and pytest.raises.
    "pytest-parametrize": "import pytest\n\n@pytest.mark.parametrize('a,b,want', [(1, 2, 3), (-1, -2, -3)])\n"
    "def test_add(a, b, want):\n    assert add(a, b) == want\n",
    "pytest-parametrize-stacked": "import pytest\n\n@pytest.mark.parametrize('a', [1, pytest.param(5)])\n"
    "@pytest.mark.parametrize(argnames=['b'], argvalues=[2])\ndef test_add(a, b):\n    assert add(a, b) == a + b\n",
    "pytest-parametrize-class": "import pytest\n\n@pytest.mark.parametrize('a', [1, 2])\nclass TestAdd:\n"
    "    @pytest.mark.parametrize('b', [3])\n    def test_add(self, a, b):\n        assert add(a, b) == a + b\n",
    "pytest-raises": "import pytest\n\ndef test_add():\n    with pytest.raises(TypeError):\n        add(1, None)\n"
    "    assert add(1, 2) == 3\n",
    # KodCode's pytest rows import the program by the name of its file.
    "from-solution-import": "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "import-solution": "import solution\n\ndef test_add():\n    assert solution.add(1, 2) == 3\n",
    "from-solution-import-star": "from solution import *\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    # xfail as pytest reads it: its condition, strict, raises; marks of a pytest.param, pytest.xfail(), a module's
    # pytestmark decorator.
    "xfail-condition-false": "import sys, pytest\n\n@pytest.mark.xfail(sys.platform == 'none', reason='x')\n"
    "def test_a():\n    assert add(1, 2) == 3\n",
    "xfail-strict": "import pytest\n\n@pytest.mark.xfail(strict=True)\ndef test_a():\n    assert add(1, 2) != 3\n",
    "xfail-raises": "import pytest\n\n@pytest.mark.xfail(raises=ZeroDivisionError)\ndef test_a():\n"
    "    assert add(1, 2) == 3\n    1 / 0\n",
    "param-marks": "import pytest\n\n@pytest.mark.parametrize('a,b,e', [(1, 2, 3), pytest.param(1, 1, 3, "
    "marks=pytest.mark.xfail(reason='k')), pytest.param(9, 9, 0, marks=pytest.mark.skip)])\n"
    "def test_a(a, b, e):\n    assert add(a, b) == e\n",
    "imperative-xfail": "import pytest\n\ndef test_a():\n    assert add(1, 2) == 3\n\n"
    "def test_b():\n    pytest.xfail('not yet')\n",
    "module-pytestmark-decorator": "import pytest\npytestmark = pytest.mark.parametrize('a', [1, 2])\n\n"
    "def test_a(a):\n    assert add(a, 0) == a\n",
    # request.getfixturevalue, tmp_path_factory in a fixture of the module's scope.
    "getfixturevalue-and-factory": "import pytest\n\n@pytest.fixture\ndef one():\n    return 1\n\n"
    "@pytest.fixture\ndef two():\n    return 2\n\n@pytest.mark.parametrize('name,val', [('one', 1), ('two', 2)])\n"
    "def test_a(request, name, val):\n    assert add(request.getfixturevalue(name), 0) == val\n\n"
    "@pytest.fixture(scope='module')\ndef data_dir(tmp_path_factory):\n    d = tmp_path_factory.mktemp('data')\n"
    "    (d / 'n.txt').write_text('3')\n    return d\n\n"
    "def test_b(data_dir):\n    assert add(int((data_dir / 'n.txt').read_text()), 1) == 4\n",
    # pytest's module and function hooks.
    "setup-module-and-function": "state = {}\n\ndef setup_module(module):\n    state['base'] = 1\n\n"
    "def setup_function(function):\n    state['n'] = state.get('n', 0) + 1\n\ndef teardown_function():\n"
    "    state['down'] = True\n\ndef test_a():\n    assert add(state['base'], 2) == 3 and state['n'] == 1\n\n"
    "def test_b():\n    assert state['n'] == 2 and state['down']\n",
    # Tests wrapped by what is no function: lru_cache's wrapper, a class's instance.
    "wrapped-lru-cache": "import functools\n\n@functools.lru_cache(maxsize=None)\ndef test_a():\n"
    "    assert add(1, 2) == 3\n",
    "wrapped-by-an-object": "import functools\n\nclass Deco:\n    def __init__(self, f):\n"
    "        functools.update_wrapper(self, f)\n        self.f = f\n\n    def __call__(self, *a, **k):\n"
    "        return self.f(*a, **k)\n\n@Deco\ndef test_a():\n    assert add(1, 2) == 3\n",
    # The tests' own pytest fixtures: plain, yield with a teardown, named, asking for others, of a wider scope,
    # autouse, parametrized, a class's own, by usefixtures, with a finalizer.
    # Tests that a library's decorator wraps (mock.patch's): they ran nothing, and every program passed.
    "mock-patch-decorator": "from unittest.mock import patch\n\n@patch('builtins.print')\n"
    "def test_add(mock_print):\n    assert add(1, 2) == 3\n",
    "mock-patch-parametrize-fixture": "import pytest\nfrom unittest.mock import patch\n\n"
    "@pytest.mark.parametrize('b', [2])\n@patch('builtins.print')\ndef test_add(mock_print, b, tmp_path):\n"
    "    assert add(1, b) == 3 and tmp_path.is_dir()\n",
    "pytest-fixture": "import pytest\n\n@pytest.fixture\ndef numbers():\n    return (1, 2)\n\n"
    "def test_add(numbers):\n    assert add(*numbers) == 3\n",
    "pytest-fixture-yield-named-chain": "import pytest\nlog = []\n\n@pytest.fixture\ndef one():\n"
    "    log.append('up')\n    yield 1\n    log.append('down')\n\n@pytest.fixture(name='pair')\n"
    "def make_pair(one):\n    return (one, 2)\n\ndef test_add(pair):\n    assert add(*pair) == 3\n\n"
    "def test_torn_down():\n    assert log == ['up', 'down']\n",
    "pytest-fixture-scopes-autouse": "import pytest\nmade = []\n\n@pytest.fixture(autouse=True)\ndef each():\n"
    "    made.append('t')\n\n@pytest.fixture(scope='module')\ndef base():\n    made.append(1)\n    return 1\n\n"
    "def test_a(base):\n    assert add(base, 2) == 3\n\ndef test_b(base):\n    assert made == [1, 't', 't']\n",
    "pytest-fixture-params": "import pytest\n\n@pytest.fixture(params=[(1, 2, 3), (-1, -2, -3)])\n"
    "def case(request):\n    return request.param\n\nseen = []\n\ndef test_add(case):\n    seen.append(case)\n"
    "    assert add(case[0], case[1]) == case[2]\n\ndef test_each_param():\n    assert len(seen) == 2\n",
    "pytest-class-fixture": "import pytest\n\nclass TestAdd:\n    @pytest.fixture\n    def one(self):\n"
    "        return self.base\n\n    def setup_method(self):\n        self.base = 1\n\n"
    "    def test_add(self, one):\n        assert add(one, 2) == 3\n",
    "pytest-usefixtures-finalizer": "import pytest\nstate = {}\n\n@pytest.fixture\ndef setup(request):\n"
    "    state['a'] = 1\n    request.addfinalizer(state.clear)\n\n@pytest.mark.usefixtures('setup')\n"
    "def test_add():\n    assert add(state['a'], 2) == 3\n\ndef test_cleared():\n    assert state == {}\n",
    # pytest's marks around unittest's cases (the module's, an outer test class's) and on them, as pytest applies
    # them: skip, skipif that holds, xfail (its raises, run=False).
    "module-xfail-on-a-case": "import pytest, unittest\npytestmark = pytest.mark.xfail(raises=ZeroDivisionError)\n\n"
    "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n        1 / 0\n",
    "class-marks-on-nested-cases": "import sys, pytest, unittest\n\n@pytest.mark.skip(reason='later')\n"
    "class TestLater:\n    class Case(unittest.TestCase):\n        def test_later(self):\n"
    "            self.assertEqual(add(1, 2), 4)\n\n"
    "@pytest.mark.skipif(sys.version_info > (3,), reason='py3')\nclass TestOld:\n"
    "    class Case(unittest.TestCase):\n        def test_old(self):\n            self.assertEqual(add(1, 2), 4)\n\n"
    "@pytest.mark.xfail(reason='known')\nclass TestKnown:\n    class Case(unittest.TestCase):\n"
    "        def test_known(self):\n            self.assertEqual(add(1, 2), 4)\n\n"
    "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
    "marks-on-a-case": "import pytest, unittest\n\n@pytest.mark.skip\nclass Later(unittest.TestCase):\n"
    "    @classmethod\n    def setUpClass(cls):\n        raise RuntimeError('not yet')\n\n"
    "    def test_later(self):\n        pass\n\nclass T(unittest.TestCase):\n"
    "    @pytest.mark.xfail(run=False)\n    def test_hangs(self):\n        while True:\n            pass\n\n"
    "    @pytest.mark.xfail(raises=ZeroDivisionError)\n    def test_zero(self):\n        1 / 0\n\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
    # pytest.skip(), xfail() and fail() in a unittest case (its setUp too): its outcomes, as in pytest.
    "pytest-outcomes-in-a-case": "import pytest, unittest\n\nclass Later(unittest.TestCase):\n    def setUp(self):\n"
    "        pytest.skip('later')\n\n    def test_later(self):\n        self.assertEqual(add(1, 2), 4)\n\n"
    "class T(unittest.TestCase):\n    def test_known(self):\n        pytest.xfail('known')\n\n"
    "    def test_add(self):\n        if add(1, 2) != 3:\n            pytest.fail('1 + 2')\n",
    # An outer test class's fixture method is its own class's, never the nested class's: pytest binds it to an
    # instance of the outer class; and one of the class's scope to an instance of the class, never a test's.
    "outer-autouse-fixture-in-a-nested-class": "import pytest\n\nclass TestOuter:\n    base = 1\n\n"
    "    @pytest.fixture(autouse=True)\n    def start(self):\n        self.one = self.base\n\n"
    "    def test_outer(self):\n        assert add(self.one, 2) == 3\n\n    class TestInner:\n"
    "        def test_add(self):\n            assert not hasattr(self, 'one')\n            assert add(1, 2) == 3\n",
    "class-scope-fixture-method": "import pytest\n\nclass TestAdd:\n    @pytest.fixture(scope='class')\n"
    "    def one(self):\n        self.made = True\n        return 1\n\n    def test_add(self, one):\n"
    "        assert not hasattr(self, 'made')\n        assert add(one, 2) == 3\n",
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
    # No value of the program's is a fixture, though it marks one with pytest's own decorator.
    faker = "import pytest\n\n@pytest.fixture\ndef numbers():\n    return (1, 2)\n\n" + WRONG
    for form in (tests, "from solution import *\n\n" + tests):
        assert _verdicts(hostile, form, [faker, RIGHT]) == ["RE", "RE"]


@pytest.mark.parametrize(
    "fixture",
    [
        "@pytest.fixture\ndef numbers():\n    raise ValueError('no numbers')\n",
        "@pytest.fixture\ndef numbers(more):\n    return (1, 2)\n\n@pytest.fixture\ndef more(numbers):\n    return 1\n",
        "@pytest.fixture\ndef numbers():\n    yield (1, 2)\n    yield (3, 4)\n",
        "@pytest.fixture\nasync def numbers():\n    return (1, 2)\n",
        "@pytest.fixture\ndef numbers():\n    yield (1, 2)\n    assert False, 'teardown'\n",
        "@pytest.fixture\ndef numbers(request):\n    return request.param\n",  # no params: pytest's error too
    ],
    ids=["raises", "cycle", "yields-twice", "coroutine", "teardown-fails", "param-without-params"],
)
def test_a_fixture_that_fails_or_cannot_be_made_passes_nothing(hostile: TestClient, fixture: str) -> None:
    tests = "import pytest\n\n" + fixture + "\ndef test_add(numbers):\n    assert add(*numbers) == 3\n"
    assert "AC" not in _verdicts(hostile, tests, [WRONG, RIGHT])


@pytest.mark.parametrize(
    "fixture",
    [
        "@pytest.fixture\ndef one():\n    assert add(2, 2) == 4\n    return 1\n",
        "@pytest.fixture\ndef one():\n    yield 1\n    assert add(2, 2) == 4\n",
        "@pytest.fixture\ndef one():\n    if add(2, 2) != 4:\n        pytest.fail('2 + 2')\n    return 1\n",
    ],
    ids=["in-its-setup", "in-its-teardown", "fail-in-its-setup"],
)
def test_an_assertion_in_a_fixture_errors_its_test_as_in_pytest(hostile: TestClient, fixture: str) -> None:
    tests = "import pytest\n\n" + fixture + "\ndef test_one(one):\n    assert one == 1\n"
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == ["RE", "AC"]


def test_tmp_path_is_a_directory_the_program_reads(hostile: TestClient) -> None:
    right = "def total(path):\n    with open(path) as f:\n        return sum(map(int, f.read().split()))\n"
    wrong = "def total(path):\n    return 6\n"
    tests = (
        "def test_total(tmp_path):\n    path = tmp_path / 'numbers.txt'\n    path.write_text('1 2 4')\n"
        "    assert total(str(path)) == 7\n\ndef test_fresh(tmp_path, tmpdir):\n"
        "    assert list(tmp_path.iterdir()) == []\n"
        "    assert str(tmpdir) != str(tmp_path)\n"
    )
    assert _verdicts(hostile, tests, [wrong, right]) == ["WA", "AC"]


def test_monkeypatch_binds_the_programs_global_and_undoes_it(hostile: TestClient) -> None:
    program = "LIMIT = 10\ndef under(x):\n    return x < LIMIT\n"
    tests = (
        "import solution\n\ndef test_lowered(monkeypatch):\n    monkeypatch.setattr(solution, 'LIMIT', 3)\n"
        "    assert solution.under(5) is False\n\ndef test_undone():\n    assert solution.under(5)\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]


def test_capsys_reads_the_tests_prints_and_the_programs_in_their_order(hostile: TestClient) -> None:
    right, wrong = "def greet(n):\n    print(f'hi {n}')\n", "def greet(n):\n    print(f'ho {n}')\n"
    tests = (
        "import sys\n\ndef test_greet(capsys):\n    print('a')\n    greet(1)\n    print('c', file=sys.stderr)\n"
        "    print('d')\n    out, err = capsys.readouterr()\n    assert (out, err) == ('a\\nhi 1\\nd\\n', 'c\\n')\n"
    )
    assert _verdicts(hostile, tests, [wrong, right]) == ["WA", "AC"]


@pytest.mark.parametrize(
    "tests",
    [
        "def test_add():\n    assert add(1, 2) == 3\n    yield\n",  # a generator: calling it runs nothing
        "async def test_add():\n    assert add(1, 2) == 3\n",
        "from unittest.mock import patch\n\n@patch('builtins.print')\ndef test_add(m):\n    assert add(1, 2) == 3\n"
        "    yield\n",  # a wrapper that makes a generator: nothing of it ran
        "import functools\n\ndef _check(a, b, e):\n    assert add(a, b) == e\n\n"
        "test_a = functools.partial(_check, 1, 2, 3)\n",  # a callable that is no function: pytest runs none
        "import sys\nassert add(1, 2) == 3\nsys.exit(0.0)\n",  # Python prints 0.0 and exits 1
    ],
    ids=["generator", "coroutine", "wrapped-generator", "partial", "exit-float"],
)
def test_tests_no_runner_can_run_or_that_exit_unwell_pass_nothing(hostile: TestClient, tests: str) -> None:
    assert "AC" not in _verdicts(hostile, tests, [WRONG, RIGHT])


@pytest.mark.parametrize("after", ["", "CHECKS = [check]\n"], ids=["alone", "named"])
def test_an_uncalled_check_is_called_with_the_declared_entry_point(hostile: TestClient, after: str) -> None:
    """HumanEval's test text as published defines check(candidate) and calls nothing: with the task's entry point
    declared, it is called on it, as HumanEval's harness does (it passed any program). Named, never called:
    the same."""
    body: dict[str, Any] = {
        "language": "python",
        "programs": [WRONG, RIGHT],
        "tests": [{"assert_code": "def check(candidate):\n    assert candidate(1, 2) == 3\n" + after}],
        "function": "add",
        "cache": False,
    }
    assert [p["verdict"] for p in hostile.post("/v1/evaluate", json=body).json()["results"]] == ["WA", "AC"]


def test_a_program_that_exits_passes_nothing(hostile: TestClient) -> None:
    """A ``SystemExit`` the tests did not raise (the program's, in a call) is no end of the tests."""
    exits = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    assert _verdicts(hostile, FORMS["unittest-main"], [exits]) != ["AC"]
    assert _verdicts(hostile, FORMS["pytest"], [exits]) != ["AC"]


def test_a_name_the_program_lacks_cannot_be_imported_from_it(hostile: TestClient) -> None:
    tests = "from solution import add, sub\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    assert _verdicts(hostile, tests, [RIGHT]) == ["RE"]
    # Each run's own: one checker serves a series, and the next run's tests import the next program.
    tests = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    assert _verdicts(hostile, tests, [RIGHT, WRONG, RIGHT]) == ["AC", "WA", "AC"]


def test_a_case_pytest_would_skip_runs_nothing_and_indirect_parameters_pass_nothing(hostile: TestClient) -> None:
    skipped = (
        "import pytest\n\n@pytest.mark.parametrize('a', [pytest.param(9, marks=pytest.mark.skip), 1])\n"
        "def test_add(a):\n    assert add(a, 2) == a + 2\n"
    )
    assert _verdicts(hostile, skipped, [WRONG, RIGHT]) == ["WA", "AC"]
    indirect = (
        "import pytest\n\n@pytest.mark.parametrize('a', [1], indirect=True)\ndef test_add(a):\n"
        "    assert add(a, 2) == a + 2\n"
    )
    assert "AC" not in _verdicts(hostile, indirect, [WRONG, RIGHT])


def test_capsys_reads_what_the_program_printed(hostile: TestClient) -> None:
    """pytest's ``capsys``, as KodCode's rows use it: the program prints in its own process."""
    right, wrong = "def greet(n):\n    print(f'hi {n}')\n", "def greet(n):\n    print(f'ho {n}')\n"
    tests = (
        "import sys\n\ndef test_greet(capsys):\n    greet(1)\n    out, err = capsys.readouterr()\n"
        "    assert out == 'hi 1\\n' and err == ''\n    greet(2)\n    assert capsys.readouterr().out == 'hi 2\\n'\n"
    )
    assert _verdicts(hostile, tests, [wrong, right]) == ["WA", "AC"]
    silent = "def greet(n):\n    pass\n"  # what the fixture began with is no output of the program's
    assert _verdicts(hostile, tests, [silent]) == ["WA"]


@pytest.mark.parametrize(
    "tests",
    [
        "log = []\n\ndef test_a():\n    log.append(add(1, 2))\n    assert log == [3]\n\ntest_a()\n",
        "log = []\n\ndef test_a():\n    log.append(add(1, 2))\n    assert log == [3]\n\nfor t in [test_a]:\n    t()\n",
        "def repeat(f):\n    def wrapper():\n        f()\n    return wrapper\n\ncalls = []\n\n@repeat\n"
        "def test_once():\n    calls.append(add(1, 2))\n    assert calls == [3]\n\ntest_once()\n",
    ],
    ids=["script", "listed-and-run", "wrapped"],
)
def test_a_test_the_code_ran_is_run_again_as_pytest_runs_it(hostile: TestClient, tests: str) -> None:
    """A script's own call of a test cannot stand for pytest's run of it (ran_tests.py): pytest runs such a call
    as it imports the tests, and the test again as it collects it, and so does the checker. A test that counts on
    running once fails every program there, as it does in pytest (before, the checker ran it once)."""
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == ["WA", "WA"]


def test_the_programs_values_read_through_its_module_follow_it(hostile: TestClient) -> None:
    program = (
        "count = 0\nmemo = {}\ndef increment():\n    global count\n    count += 1\n"
        "def fib(n):\n    if n not in memo:\n        memo[n] = n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "    return memo[n]\n"
    )
    tests = (
        "import solution\nsolution.increment()\nassert solution.count == 1\nsolution.increment()\n"
        "assert solution.count == 2\nassert solution.memo == {}\nsolution.fib(3)\nassert 3 in solution.memo\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]


# A program that writes a conftest.py where the checker runs: pytest.main() in the checker would load it.
CONFTEST = (
    "import os\nwith open('conftest.py', 'w') as f:\n"
    "    f.write('import sys\\\\nm = sys.modules.get(\"codegym_sandbox.agent.test_forms\")\\\\n'\n"
    '            \'if m is not None:\\\\n    m.outcome_of = lambda exc: "passed"\\\\nprint("CONFTEST RAN")\\\\n\')\n'
)


@pytest.mark.parametrize("main", ["pytest.main()", "sys.exit(pytest.main([__file__]))"])
def test_pytest_main_in_the_tests_runs_nothing_of_the_programs(hostile: TestClient, main: str) -> None:
    tests = (
        "import sys\nimport pytest\nfrom solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\n"
        f"if __name__ == '__main__':\n    {main}\n"
    )
    wrong = _evaluate_all(hostile, tests, [CONFTEST + WRONG])
    assert wrong[0]["verdict"] == "WA" and "CONFTEST" not in wrong[0]["tests"][0]["stdout"], wrong
    assert _verdicts(hostile, tests, [RIGHT]) == ["AC"]


def _evaluate_all(client: TestClient, tests: str, programs: list[str]) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


def test_marks_are_the_tests_own_never_the_programs(hostile: TestClient) -> None:
    """A program's object named ``pytestmark`` (through a star import) decided which cases ran: none."""
    fake = "class _Mark:\n    name = 'parametrize'\n    args = ('unused', [])\n    kwargs = {}\npytestmark = _Mark()\n"
    tests = "from solution import *\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    assert _verdicts(hostile, tests, [fake + WRONG, fake + RIGHT]) == ["WA", "AC"]


def test_a_test_class_on_a_class_of_the_programs_is_no_pass(hostile: TestClient) -> None:
    program = "class Base:\n    pass\n" + WRONG
    tests = "class TestAdd(Base):\n    def test_add(self):\n        assert add(1, 2) == 3\n"
    assert "AC" not in _verdicts(hostile, tests, [program])


@pytest.mark.parametrize(
    ("tests", "wrong"),
    [
        # A case with a mark of its own that skips nothing runs.
        (
            "import pytest\n\n@pytest.mark.parametrize('a', [pytest.param(1, marks=pytest.mark.slow), "
            "pytest.param(2, marks=pytest.mark.skipif(False, reason='no'))])\ndef test_add(a):\n"
            "    assert add(a, 2) == a + 2\n",
            "WA",
        ),
        # skip, skipif that holds, xfail that fails, pytest.skip(): as pytest, no failure; the rest still judges.
        (
            "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_skipped():\n    assert False\n\n"
            "@pytest.mark.skipif(True, reason='never here')\ndef test_not_here():\n    assert False\n\n"
            "@pytest.mark.xfail\ndef test_known_bug():\n    assert add(1, 1) == 3\n\n"
            "def test_skips_itself():\n    pytest.skip('not today')\n    assert False\n\n"
            "def test_add():\n    assert add(1, 2) == 3\n",
            "WA",
        ),
    ],
    ids=["marked-cases-run", "skips-and-expected-failures"],
)
def test_pytest_marks_run_what_pytest_runs(hostile: TestClient, tests: str, wrong: str) -> None:
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == [wrong, "AC"]


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        # A module's skip reaches its cases and those in its test classes: every program passes, as in pytest.
        (
            "import pytest, unittest\npytestmark = pytest.mark.skip(reason='later')\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 4)\n\n"
            "class TestOuter:\n    class Case(unittest.TestCase):\n        def test_add(self):\n"
            "            self.assertEqual(add(1, 2), 4)\n",
            ["AC", "AC"],
        ),
        # An outer class's strict xfail: a case that passes fails (the right program), one that fails passes.
        (
            "import pytest, unittest\n\n@pytest.mark.xfail(strict=True)\n"
            "class TestOuter:\n    class Case(unittest.TestCase):\n        def test_add(self):\n"
            "            self.assertEqual(add(1, 2), 3)\n",
            ["AC", "WA"],
        ),
        # xfail(raises=...) passes no failure of another kind.
        (
            "import pytest, unittest\n\nclass T(unittest.TestCase):\n"
            "    @pytest.mark.xfail(raises=ZeroDivisionError)\n    def test_add(self):\n"
            "        self.assertEqual(add(1, 2), 4)\n",
            ["WA", "WA"],
        ),
        # The closest xfail is the one read (the test's, a param's, its class's, an outer class's, the module's):
        # here the outer class's raises=, which a failed assertion is not, in a case, a method and a param.
        (
            "import pytest, unittest\npytestmark = pytest.mark.xfail()\n\n"
            "@pytest.mark.xfail(raises=ZeroDivisionError)\nclass TestOuter:\n"
            "    class Case(unittest.TestCase):\n        def test_add(self):\n"
            "            self.assertEqual(add(1, 2), 3)\n\n"
            "    def test_method(self):\n        assert add(1, 2) == 3\n\n"
            "@pytest.mark.parametrize('a', [pytest.param(1, marks=pytest.mark.xfail(raises=ZeroDivisionError))])\n"
            "def test_param(a):\n    assert add(a, 2) == 3\n",
            ["WA", "AC"],
        ),
        # A strict xfail's case that runs subtests fails, whatever its subtests do (pytest 9).
        (
            "import pytest, unittest\n\nclass T(unittest.TestCase):\n    @pytest.mark.xfail(strict=True)\n"
            "    def test_add(self):\n        for a in (1, 2):\n            with self.subTest(a=a):\n"
            "                self.assertEqual(add(a, 2), a + 2)\n",
            ["WA", "WA"],
        ),
        # pytest's outcomes in a case's class hooks, as pytest takes them: a skip (or xfail) in setUpClass skips
        # the class's tests; in tearDownClass it changes no test's outcome; pytest.fail() there is the class's
        # error, for every program (before, pytest's outcomes left unittest's suite: RE or WA, whatever the tests).
        (
            "import pytest, unittest\n\nclass T(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
            "        pytest.skip('later')\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
            ["AC", "AC"],
        ),
        (
            "import pytest, unittest\n\nclass T(unittest.TestCase):\n    @classmethod\n    def tearDownClass(cls):\n"
            "        pytest.xfail('later')\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
            ["WA", "AC"],
        ),
        (
            "import pytest, unittest\n\nclass T(unittest.TestCase):\n    @classmethod\n    def tearDownClass(cls):\n"
            "        pytest.fail('never')\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
            ["RE", "RE"],  # pytest: an error, as a case's error is here
        ),
    ],
    ids=[
        "module-skip-on-cases",
        "strict-xfail-on-a-case-that-passes",
        "xfail-raises-another-error",
        "closest-xfail-first",
        "strict-xfail-with-subtests",
        "skip-in-set-up-class",
        "skip-in-tear-down-class",
        "fail-in-tear-down-class",
    ],
)
def test_pytest_marks_reach_unittest_cases_as_in_pytest(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == verdicts


_P = "import pytest, unittest\n"
_NOOP = "class T(unittest.TestCase):\n    def test_noop(self):\n        pass\n"
_CHECK_AFTER = "    yield\n    assert add(2, 2) == 4\n"  # a fixture's body, whose teardown checks the program
_CHECKS = "        assert add(2, 2) == 4\n\n"  # a method's body that checks the program
_NOOP_TEST = "    def test_noop(self):\n        pass\n"
_SKIPPED = "@unittest.skip('later')\nclass T(unittest.TestCase):\n" + _NOOP_TEST


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        # An assertion after a fixture's yield is its teardown's: pytest errors the case it ran around (before,
        # no fixture ran around a unittest case: every program passed); one before it errors the case unrun.
        (_P + "@pytest.fixture(autouse=True)\ndef check():\n" + _CHECK_AFTER + "\n" + _NOOP, ["RE", "AC"]),
        (_P + "@pytest.fixture(autouse=True)\ndef check():\n    assert add(2, 2) == 4\n\n" + _NOOP, ["RE", "AC"]),
        (
            _P + "@pytest.fixture(scope='class')\ndef check():\n" + _CHECK_AFTER + "\n"
            "@pytest.mark.usefixtures('check')\n" + _NOOP,
            ["RE", "AC"],
        ),
        (
            _P
            + "@pytest.fixture\ndef check():\n"
            + _CHECK_AFTER
            + "\npytestmark = pytest.mark.usefixtures('check')\n\n"
            "class T(unittest.TestCase):\n    @unittest.skip('unittest runs pytest fixtures around it all the same')\n"
            "    def test_noop(self):\n        pass\n",
            ["RE", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    @pytest.fixture(autouse=True)\n    def check(self):\n"
            "        yield\n        assert add(2, 2) == 4\n\n    def test_noop(self):\n        pass\n",
            ["RE", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    @pytest.fixture(autouse=True)\n    def start(self, tmp_path):\n"
            "        self.one = 1\n\n    def test_add(self):\n        self.assertEqual(add(self.one, 2), 3)\n",
            ["WA", "AC"],
        ),
        (
            _P + "class TestOuter:\n    @pytest.fixture(autouse=True)\n    def check(self):\n"
            "        yield\n        assert add(2, 2) == 4\n\n    class Case(unittest.TestCase):\n"
            "        def test_noop(self):\n            pass\n",
            ["RE", "AC"],
        ),
        # pytest's order: the module's fixtures, setUpClass, the class's, the test's (autouse first), setUp; and
        # back, the class's fixtures before tearDownClass.
        (
            _P + "log = []\n\n@pytest.fixture(scope='module', autouse=True)\ndef mod():\n    log.append('mod')\n\n"
            "@pytest.fixture(autouse=True)\ndef each():\n    log.append('fix')\n    yield\n    log.append('/fix')\n\n"
            "@pytest.fixture(scope='class')\ndef cls_fix():\n    log.append('cls')\n    yield\n"
            "    log.append('/cls')\n\n"
            "@pytest.mark.usefixtures('cls_fix')\nclass A(unittest.TestCase):\n    @classmethod\n"
            "    def setUpClass(cls):\n        log.append('setUpClass')\n\n    @classmethod\n"
            "    def tearDownClass(cls):\n        log.append('tearDownClass')\n\n    @pytest.fixture(autouse=True)\n"
            "    def own(self):\n        log.append('own')\n        yield\n        log.append('/own')\n\n"
            "    def setUp(self):\n        log.append('setUp')\n\n"
            "    def tearDown(self):\n        log.append('tearDown')\n\n"
            "    def test_a(self):\n        log.append(add(1, 2))\n\n"
            "class B(unittest.TestCase):\n    def test_b(self):\n"
            "        assert log == ['mod', 'setUpClass', 'cls', 'fix', 'own', 'setUp', 3, 'tearDown', '/own', '/fix',"
            " '/cls', 'tearDownClass', 'fix']\n",
            ["WA", "AC"],
        ),
        # A skip in a fixture skips the case; a parametrized fixture cannot be given to one: pytest errors it.
        (
            _P + "@pytest.fixture(autouse=True)\ndef later():\n    pytest.skip('later')\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 4)\n",
            ["AC", "AC"],
        ),
        (
            _P + "@pytest.fixture(autouse=True, params=[1, 2])\ndef p(request):\n    return request.param\n\n" + _NOOP,
            ["RE", "RE"],
        ),
        # pytest's xunit hooks on a case (it makes them autouse fixtures there): before, none ran, and an assertion
        # there passed any program.
        (
            _P + "class T(unittest.TestCase):\n    def teardown_method(self, method):\n" + _CHECKS + _NOOP_TEST,
            ["RE", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    def setup_method(self, method):\n        self.three = add(1, 2)\n\n"
            "    def test_add(self):\n        self.assertEqual(self.three, 3)\n",
            ["WA", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    @classmethod\n    def setup_class(cls):\n"
            "        cls.three = add(1, 2)\n\n    def test_add(self):\n        self.assertEqual(self.three, 3)\n",
            ["WA", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    @classmethod\n    def teardown_class(cls):\n" + _CHECKS + _NOOP_TEST,
            ["RE", "AC"],
        ),
        # Their order among the fixtures and unittest's own hooks, as pytest's.
        (
            _P + "log = []\n\n@pytest.fixture(autouse=True)\ndef each():\n    log.append('fix')\n    yield\n"
            "    log.append('/fix')\n\nclass A(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
            "        log.append('setUpClass')\n\n    @classmethod\n    def tearDownClass(cls):\n"
            "        log.append('tearDownClass')\n\n    def setup_class(cls):\n        log.append('setup_class')\n\n"
            "    def teardown_class(cls):\n        log.append('teardown_class')\n\n    @pytest.fixture(autouse=True)\n"
            "    def own(self):\n        log.append('own')\n        yield\n        log.append('/own')\n\n"
            "    def setup_method(self, method):\n        log.append('setup_method ' + method.__name__)\n\n"
            "    def teardown_method(self, method):\n        log.append('teardown_method')\n\n"
            "    def setUp(self):\n        log.append('setUp')\n\n"
            "    def test_a(self):\n        log.append(add(1, 2))\n\n"
            "class B(unittest.TestCase):\n    def test_b(self):\n"
            "        assert log == ['setUpClass', 'setup_class', 'fix', 'setup_method test_a', 'own', 'setUp', 3,"
            " '/own', 'teardown_method', '/fix', 'teardown_class', 'tearDownClass', 'fix']\n",
            ["WA", "AC"],
        ),
        # The module's autouse fixtures of the class's scope: made before setUpClass, ended after tearDownClass.
        (
            _P + "DATA = []\n\n@pytest.fixture(scope='class', autouse=True)\ndef data():\n    DATA.append(1)\n"
            "    yield\n    DATA.append('/data')\n\nclass T(unittest.TestCase):\n    @classmethod\n"
            "    def setUpClass(cls):\n        cls.n = len(DATA)\n\n    @classmethod\n    def tearDownClass(cls):\n"
            "        DATA.append('tearDownClass')\n\n    def test_a(self):\n        assert self.n == 1\n"
            "        assert add(1, 2) == 3\n\nclass U(unittest.TestCase):\n    def test_b(self):\n"
            "        assert DATA[:3] == [1, 'tearDownClass', '/data'], DATA\n",
            ["WA", "AC"],
        ),
        # Around a class unittest skips, pytest makes the fixtures of a wider scope and the module's of the class's
        # (before, none): not the function's, nor the class's own.
        (
            _P + "@pytest.fixture(scope='module', autouse=True)\ndef check():\n" + _CHECK_AFTER + "\n" + _SKIPPED,
            ["RE", "AC"],
        ),
        (
            _P + "@pytest.fixture(scope='class', autouse=True)\ndef check():\n" + _CHECK_AFTER + "\n" + _SKIPPED,
            ["RE", "AC"],
        ),
        (_P + "@pytest.fixture(autouse=True)\ndef check():\n" + _CHECK_AFTER + "\n" + _SKIPPED, ["AC", "AC"]),
        (
            _P
            + "@unittest.skip('later')\nclass T(unittest.TestCase):\n    @pytest.fixture(scope='class', autouse=True)\n"
            "    def check(self):\n    " + _CHECK_AFTER.replace("\n    ", "\n        ") + _NOOP_TEST,
            ["AC", "AC"],
        ),
    ],
    ids=[
        "autouse-teardown",
        "autouse-setup",
        "usefixtures-of-the-class-scope",
        "module-usefixtures-on-a-unittest-skip",
        "autouse-method-of-a-case",
        "autouse-method-sets-the-case",
        "outer-class-autouse-on-a-nested-case",
        "order",
        "skip-in-a-fixture",
        "parametrized-fixture",
        "teardown-method",
        "setup-method",
        "setup-class",
        "teardown-class",
        "xunit-order",
        "module-class-scope-fixture-around-set-up-class",
        "skipped-class-module-fixture",
        "skipped-class-class-scope-autouse",
        "skipped-class-function-autouse",
        "skipped-class-own-class-fixture",
    ],
)
def test_pytest_fixtures_run_around_unittest_cases(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == verdicts


_BIG = "def add(a, b):\n    return a + b if a < 100 else 0\n"  # wrong for large numbers only
_GATHERS = "results = []\n\n"


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        # A test that checks what others gathered runs after them, as pytest runs it: in the order the tests define
        # them (before, a class's by name, unittest's cases after all else), an outer class's teardown_class after
        # its nested classes' tests. Each passed the program wrong for large numbers.
        (
            "class TestAdd:\n    results = []\n\n    def test_run(self):\n"
            "        TestAdd.results.append(add(1000, 1))\n\n"
            "    def test_check(self):\n        assert all(r == 1001 for r in TestAdd.results)\n",
            ["WA", "AC"],
        ),
        (
            _GATHERS + "class Base:\n    def test_run(self):\n        results.append(add(1000, 1))\n\n"
            "class TestAdd(Base):\n    def test_check(self):\n"
            "        assert results and all(r == 1001 for r in results)\n",
            ["WA", "AC"],
        ),
        (
            "import unittest\n" + _GATHERS + "class T(unittest.TestCase):\n    def test_run(self):\n"
            "        results.append(add(1000, 1))\n\ndef test_check():\n    assert all(r == 1001 for r in results)\n",
            ["WA", "AC"],
        ),
        (
            _GATHERS
            + "class TestAll:\n    @classmethod\n    def teardown_class(cls):\n        assert all(results), results\n\n"
            "    def test_small(self):\n        results.append(add(1, 2) == 3)\n\n    class TestBig:\n"
            "        def test_big(self):\n            results.append(add(1000, 1) == 1001)\n",
            ["RE", "AC"],
        ),
        (
            "import unittest\n" + _GATHERS + "class TestAll:\n    @classmethod\n    def teardown_class(cls):\n"
            "        assert all(results), results\n\n    def test_small(self):\n"
            "        results.append(add(1, 2) == 3)\n\n    class Big(unittest.TestCase):\n"
            "        def test_big(self):\n            results.append(add(1000, 1) == 1001)\n",
            ["RE", "AC"],
        ),
    ],
    ids=[
        "a-class-in-its-order",
        "bases-first",
        "cases-in-the-module-order",
        "outer-teardown-class-after-nested",
        "outer-teardown-class-after-nested-case",
    ],
)
def test_tests_run_in_the_order_they_are_defined(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    assert _verdicts(hostile, tests, [_BIG, RIGHT]) == verdicts


@pytest.mark.parametrize(
    "tests",
    [
        # The code ran one test of a class (a __main__ block, which pytest never runs): every other test of it and
        # of its subclasses is still collected (before, the whole class was taken for run).
        "class TestAdd:\n    def test_small(self):\n        assert add(1, 2) == 3\n\n    def test_big(self):\n"
        "        assert add(1000, 1) == 1001\n\nclass TestMore(TestAdd):\n    def test_more(self):\n"
        "        assert add(2000, 1) == 2001\n\nif __name__ == '__main__':\n    TestAdd().test_small()\n",
        # A test defined again after the code ran the first of that name is another test (pytest runs the last).
        "def test_add():\n    assert add(1, 2) == 3\n\ntest_add()\n\n"
        "def test_add():\n    assert add(1000, 1) == 1001\n",
        # A test the code only names, by an assignment, was taken for run: such a function records whether it ran.
        "def test_small():\n    assert add(1, 2) == 3\n\ndef verify_big():\n    assert add(1000, 1) == 1001\n\n"
        "verify_big.__test__ = True\n",
        # pytest's setup_class and setup_function are fixtures of their scope: made after the module's (before, a
        # setup_class that read what a module fixture loads found nothing, and the test checked nothing).
        "import pytest\n\nDATA = []\n\n@pytest.fixture(scope='module', autouse=True)\ndef load():\n"
        "    DATA.extend([1000, 2000])\n    yield\n\nclass TestAdd:\n    @classmethod\n    def setup_class(cls):\n"
        "        cls.cases = list(DATA)\n\n    def test_all(self):\n        assert self.cases\n"
        "        for n in self.cases:\n            assert add(n, 1) == n + 1\n",
        "import pytest\n\nDATA, CASES = [], []\n\n@pytest.fixture(scope='module', autouse=True)\ndef load():\n"
        "    DATA[:] = [1000, 2000]\n    yield\n\ndef setup_function(function):\n    CASES[:] = list(DATA)\n\n"
        "def test_all():\n    for n in CASES:\n        assert add(n, 1) == n + 1\n",
    ],
    ids=[
        "a-class-the-code-ran-a-test-of",
        "defined-again-after-a-call",
        "named-by-an-assignment",
        "module-fixture-before-setup-class",
        "module-fixture-before-setup-function",
    ],
)
def test_what_pytest_runs_and_when_for_a_program_right_on_small_numbers(hostile: TestClient, tests: str) -> None:
    assert _verdicts(hostile, tests, [_BIG, RIGHT]) == ["WA", "AC"]


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        # unittest's skip in an xunit hook or a fixture skips, as in pytest (it was the tests' error).
        (
            "import unittest\n\nclass T(unittest.TestCase):\n    def setup_method(self, method):\n"
            "        self.skipTest('no')\n\n    def test_a(self):\n        assert add(1, 2) == 4\n",
            ["AC", "AC"],
        ),
        (
            _P + "@pytest.fixture(autouse=True)\ndef later():\n    raise unittest.SkipTest('later')\n\n"
            "class T(unittest.TestCase):\n    def test_a(self):\n        assert add(1, 2) == 4\n",
            ["AC", "AC"],
        ),
        # What says __test__ = False (an abstract base, a helper method) pytest leaves: it failed every program.
        (
            "import unittest\n\nclass Base(unittest.TestCase):\n    __test__ = False\n    impl = None\n\n"
            "    def test_a(self):\n        assert self.impl(1, 2) == 3\n\n"
            "class TestAdd(Base):\n    __test__ = True\n    impl = staticmethod(add)\n",
            ["WA", "AC"],
        ),
        (
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        assert add(1, 2) == 3\n\n"
            "    def test_helper(self):\n        assert False\n\n    test_helper.__test__ = False\n",
            ["WA", "AC"],
        ),
        # A fixture named test_* is no test; a case whose __init__ wants the method's name is made as pytest makes it.
        (
            "import pytest\n\n@pytest.fixture\ndef test_input():\n    return (1, 2)\n\n"
            "def test_sum(test_input):\n    assert add(*test_input) == 3\n",
            ["WA", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    def __init__(self, methodName):\n"
            "        super().__init__(methodName)\n\n"
            "    @pytest.fixture(autouse=True)\n    def one(self):\n        self.one = 1\n\n"
            "    def test_a(self):\n        assert add(self.one, 2) == 3\n",
            ["WA", "AC"],
        ),
    ],
    ids=[
        "skiptest-in-setup-method",
        "skiptest-in-a-fixture",
        "test-false-on-a-base",
        "test-false-on-a-method",
        "fixture-named-test",
        "case-init-without-default",
    ],
)
def test_what_pytest_skips_or_leaves_is_skipped_or_left(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == verdicts


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        (
            _P + "@pytest.fixture(autouse=True)\ndef check():\n" + _CHECK_AFTER + "\n" + _NOOP + "\n"
            "if __name__ == '__main__':\n    unittest.main()\n",
            ["RE", "AC"],
        ),
        (
            _P + "class T(unittest.TestCase):\n    @pytest.mark.xfail(reason='later')\n    def test_later(self):\n"
            "        self.assertEqual(add(1, 2), 4)\n\n    def test_add(self):\n"
            "        self.assertEqual(add(1, 2), 3)\n\nif __name__ == '__main__':\n    unittest.main()\n",
            ["WA", "AC"],
        ),
    ],
    ids=["fixture-teardown", "xfail-mark"],
)
def test_unittest_main_in_tests_of_pytests_runs_nothing(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    """Tests that import pytest are its: it never runs their ``unittest.main()`` (their module is no ``__main__``
    there), and runs their cases in its fixtures and under its marks, as collection here does."""
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == verdicts


@pytest.mark.parametrize(
    ("tests", "verdicts"),
    [
        ("def setUpModule():\n    assert add(2, 2) == 4\n\ndef test_noop():\n    pass\n", ["RE", "AC"]),
        ("def tearDownModule():\n    assert add(2, 2) == 4\n\ndef test_noop():\n    pass\n", ["RE", "AC"]),
        ("import unittest\n\ndef teardown_module():\n    assert add(2, 2) == 4\n\n" + _NOOP, ["RE", "AC"]),
        (
            "import unittest\nn = []\n\ndef setUpModule():\n    n.append(1)\n\ndef setup_module():\n    n.append(2)\n\n"
            "def test_f():\n    assert n == [1]\n\nclass TestO:\n    class C(unittest.TestCase):\n"
            "        def test_c(self):\n            self.assertEqual(n, [1])\n\nclass T(unittest.TestCase):\n"
            "    def test_c(self):\n        self.assertEqual(n, [1])\n        self.assertEqual(add(1, 2), 3)\n",
            ["WA", "AC"],
        ),
        # unittest.main() ran the cases, in setUpModule: collection runs the functions, and no setUpModule again.
        (
            "import unittest\nn = []\n\ndef setUpModule():\n    n.append(1)\n\ndef test_f():\n    assert n == [1]\n\n"
            "class T(unittest.TestCase):\n    def test_c(self):\n        self.assertEqual(add(1, 2), 3)\n\n"
            "if __name__ == '__main__':\n    unittest.main()\n",
            ["WA", "AC"],
        ),
        # A skip in the setup hook skips all of the module's tests.
        (
            "import unittest\n\ndef setUpModule():\n    raise unittest.SkipTest('later')\n\n"
            "def test_f():\n    assert add(1, 2) == 4\n\nclass T(unittest.TestCase):\n    def test_c(self):\n"
            "        self.assertEqual(add(1, 2), 4)\n",
            ["AC", "AC"],
        ),
        (
            "import pytest\n\ndef setup_module():\n    pytest.skip('later')\n\ndef test_f():\n"
            "    assert add(1, 2) == 4\n",
            ["AC", "AC"],
        ),
    ],
    ids=[
        "setUpModule-beside-functions",
        "tearDownModule-beside-functions",
        "teardown_module-beside-cases",
        "once",
        "once-with-unittest-main",
        "unittest-skip-in-setUpModule",
        "pytest-skip-in-setup_module",
    ],
)
def test_pytest_module_hooks_run_once_around_all_tests(hostile: TestClient, tests: str, verdicts: list[str]) -> None:
    """pytest's module hooks, by either name (``setup_module`` or unittest's ``setUpModule``), once around all of a
    module's tests, its functions' and its cases' (in its test classes too); an assertion there is an error."""
    assert _verdicts(hostile, tests, [WRONG, RIGHT]) == verdicts


def test_capsys_takes_what_the_program_writes_as_a_process_would(hostile: TestClient) -> None:
    program = (
        "import sys\ndef greet(n):\n    sys.stdout.buffer.write(f'hi {n}'.encode())\n    sys.stdout.flush()\n"
        "    print('', sys.stdout.encoding)\n    print('x' * 3_000_000)\n"
    )
    tests = (
        "def test_greet(capsys):\n    greet(1)\n    out = capsys.readouterr().out\n"
        "    assert out.startswith('hi 1 utf-8\\n') and len(out) == len('hi 1 utf-8\\n') + 3_000_001\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]


def test_a_star_import_takes_what_the_program_has_as_it_runs(hostile: TestClient) -> None:
    """Names the program bound and then let go (``del``, ``except ... as err``) are not in its module."""
    program = "tmp = 1\ndel tmp\ntry:\n    int('x')\nexcept ValueError as err:\n    pass\n" + RIGHT
    tests = "from solution import *\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    assert _verdicts(hostile, tests, [program]) == ["AC"]


def test_the_tests_set_the_programs_globals_through_its_module(hostile: TestClient) -> None:
    program = "LIMIT = 10\ndef under(x):\n    return x < LIMIT\n"
    tests = (
        "import solution\n\ndef test_limit():\n    assert solution.under(5)\n    solution.LIMIT = 3\n"
        "    assert solution.LIMIT == 3 and solution.under(5) is False\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]


def test_tests_that_import_the_program_see_nothing_else_of_it(hostile: TestClient) -> None:
    """A test file that imports the program by name has its own names, as beside the program's file: a name it
    uses without importing it is no name of the program's, which could rig it (``Counter`` that answers what the
    program's function answers)."""
    honest = "from collections import Counter\n\ndef count_chars(s):\n    return Counter(s)\n"
    rigged = "def Counter(*args):\n    return 0\n\ndef count_chars(s):\n    return 0\n"
    free = "def test_count():\n    assert count_chars('aab') == Counter('aab')\n"
    for head in ("from solution import count_chars\n\n", "import solution\ncount_chars = solution.count_chars\n\n"):
        assert _verdicts(hostile, head + free, [rigged, honest]) == ["RE", "RE"]  # pytest's NameError too
        imported = head + "from collections import Counter\n\n" + free
        assert _verdicts(hostile, imported, [rigged, honest]) == ["WA", "AC"]
    # So do tests that import it by name as they run.
    for head in (
        "import importlib\nsol = importlib.import_module('solution')\n",
        "sol = __import__('solution')\n",
        "import sys\nimport solution\nsol = sys.modules['solution']\n",
        "import pytest\nsol = pytest.importorskip('solution')\n",
    ):
        assert _verdicts(hostile, head + "count_chars = sol.count_chars\n\n" + free, [rigged]) == ["RE"], head
    # A star import takes the program's names, as Python's does.
    assert _verdicts(hostile, "from solution import *\n\n" + free, [honest]) == ["AC"]


INPUTS = (
    "import sys\n\ndef double():\n    return int(input('n? ')) * 2\n\n"
    "def total():\n    return sum(int(line) for line in sys.stdin)\n\n"
    "def greet():\n    print('hello', 'world', sep='-')\n"
)
INPUT_TESTS = (
    "import io\nimport pytest\nfrom unittest.mock import patch\nfrom solution import double, total, greet\n\n"
    "def test_input(monkeypatch):\n    monkeypatch.setattr('builtins.input', lambda prompt: '3')\n"
    "    assert double() == 6\n\n"
    "@patch('builtins.input', side_effect=['4', '5'])\ndef test_side_effect(mock_input):\n"
    "    assert double() == 8\n    assert double() == 10\n    mock_input.assert_called_with('n? ')\n\n"
    "def test_stdin(monkeypatch, capsys):\n    monkeypatch.setattr('sys.stdin', io.StringIO('1\\n2\\n3\\n'))\n"
    "    assert total() == 6\n    monkeypatch.setattr('sys.stdin', io.StringIO('7\\n'))\n"
    "    assert double() == 14\n    assert capsys.readouterr().out == 'n? '\n\n"
    "@patch('builtins.print')\ndef test_print(mock_print):\n    greet()\n"
    "    mock_print.assert_called_once_with('hello', 'world', sep='-')\n\n"
    "def test_exhausted():\n    with patch('builtins.input', side_effect=['1']):\n        double()\n"
    "        with pytest.raises(Exception):\n            double()\n"
)


def test_builtins_the_tests_patch_are_the_programs_too(hostile: TestClient) -> None:
    """``input``, ``sys.stdin`` and ``print`` that the tests patch (``monkeypatch``, ``mock.patch``), as pytest's
    one process has them: the program reads what the tests give it, and prints to their mock."""
    wrong = INPUTS.replace("* 2", "* 3").replace("sep='-'", "sep='+'")
    assert _verdicts(hostile, INPUT_TESTS, [INPUTS, wrong]) == ["AC", "WA"]


def test_streams_the_tests_put_in_place_are_the_programs_too(hostile: TestClient) -> None:
    """``patch("sys.stdout", new_callable=StringIO)`` and ``contextlib.redirect_stdout``: what the program prints
    goes where the tests put the stream, as in one process; capsys still reads it as before."""
    program = "import sys\n\ndef main():\n    print(5)\n    print('e', file=sys.stderr)\n"
    tests = (
        "import io, contextlib\nfrom unittest.mock import patch\nfrom solution import main\n\n"
        "def test_patch():\n    with patch('sys.stdout', new_callable=io.StringIO) as out:\n        main()\n"
        "    assert out.getvalue() == '5\\n'\n\n"
        "def test_redirect():\n    buf, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):\n        main()\n"
        "    assert buf.getvalue() == '5\\n' and err.getvalue() == 'e\\n'\n\n"
        "def test_capsys(capsys):\n    main()\n    assert capsys.readouterr() == ('5\\n', 'e\\n')\n"
    )
    assert _verdicts(hostile, tests, [program, program.replace("print(5)", "print(6)")]) == ["AC", "WA"]


def test_patched_builtins_reach_a_returned_generator_and_an_interrupt_reaches_the_program(hostile: TestClient) -> None:
    program = (
        "def read_numbers():\n    while True:\n        line = input()\n        if not line:\n            break\n"
        "        yield int(line)\n\ndef main():\n    total = 0\n    try:\n        while True:\n"
        "            total += int(input())\n    except KeyboardInterrupt:\n        return total\n"
    )
    tests = (
        "from unittest.mock import patch\nfrom solution import read_numbers, main\n\ndef test_gen():\n"
        "    with patch('builtins.input', side_effect=['1', '2', '']):\n"
        "        assert list(read_numbers()) == [1, 2]\n\n"
        "def test_interrupt():\n    with patch('builtins.input', side_effect=['1', '2', KeyboardInterrupt]):\n"
        "        assert main() == 3\n"
    )
    assert _verdicts(hostile, tests, [program, program.replace("return total", "return total + 1")]) == ["AC", "WA"]


# The program's process asks the checker for a builtin in the middle of a call: only one the tests patched.
FORGED_CALLBACK = (
    "import sys\n\ndef add(a, b):\n    frame = sys._getframe()\n"
    "    while frame is not None and 'channel' not in frame.f_locals:\n        frame = frame.f_back\n"
    "    channel = frame.f_locals['channel']\n"
    "    channel.answer({'callback': {'op': OP, 'name': NAME, 'args': [], 'kwargs': {}, 'file': ''}})\n"
    "    channel.request()\n    return a + b\n"
)


@pytest.mark.parametrize(
    ("op", "name"), [("input", ""), ("readline", ""), ("print", ""), ("exec", ""), ("call", "add"), ("call", "log")]
)
def test_a_callback_for_what_the_tests_did_not_patch_passes_nothing(hostile: TestClient, op: str, name: str) -> None:
    program = f"OP, NAME = {op!r}, {name!r}\n\ndef helper():\n    pass\n\n" + FORGED_CALLBACK
    plain = "def test_add():\n    assert add(1, 2) == 3\n"
    patching = (  # builtins.print, and the program's helper: bound to functions of the tests'
        "import solution\nfrom unittest.mock import patch\n\n@patch('builtins.print')\n@patch('solution.helper')\n"
        "def test_add(h, p):\n    assert add(1, 2) == 3\n"
    )
    for tests in (plain, patching if op != "print" else plain):
        assert _verdicts(hostile, tests, [program]) == ["RE"]


def test_the_programs_functions_the_tests_patch_are_patched_for_the_program(hostile: TestClient) -> None:
    """``mock.patch("solution.fetch")`` and ``monkeypatch.setattr(solution, "fetch", ...)``: the program's own calls
    of ``fetch`` call the tests' function, as in one process, until the patch is undone."""
    program = (
        "def fetch(url):\n    raise RuntimeError('no network here')\n\n"
        "def total(urls):\n    return sum(fetch(u)['n'] for u in urls)\n"
    )
    tests = (
        "import pytest\nimport solution\nfrom unittest.mock import patch\nfrom solution import total\n\n"
        "@patch('solution.fetch')\ndef test_total(mock_fetch):\n    mock_fetch.return_value = {'n': 2}\n"
        "    assert total(['a', 'b']) == 4\n    assert mock_fetch.call_count == 2\n"
        "    mock_fetch.assert_called_with('b')\n\n"
        "def test_undone():\n    with pytest.raises(RuntimeError):\n        total(['a'])\n\n"
        "def test_monkeypatch(monkeypatch):\n    monkeypatch.setattr(solution, 'fetch', lambda url: {'n': len(url)})\n"
        "    assert total(['abc', 'de']) == 5\n\n"
        "def test_undone_again():\n    with pytest.raises(RuntimeError):\n        total(['a'])\n"
    )
    assert _verdicts(hostile, tests, [program, program.replace("for u in urls)", "for u in urls) + 1")]) == [
        "AC",
        "WA",
    ]


def test_the_program_has_the_whole_recursion_limit_to_itself(hostile: TestClient) -> None:
    """The frames of the program's process below the program take none of its recursion limit: a call 990 deep
    passes under the default limit, which the program sees as 1000, as ``python3`` shows it."""
    program = (
        "import sys\n\ndef depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n\n"
        "def limit():\n    return sys.getrecursionlimit()\n"
    )
    tests = (
        "from solution import depth, limit\n\ndef test_deep():\n    assert depth(990) == 990\n\n"
        "def test_limit():\n    assert limit() == 1000\n"
    )
    assert _verdicts(hostile, tests, [program, program.replace("1 + depth", "2 + depth")]) == ["AC", "WA"]


def test_the_interpreter_state_the_tests_set_is_the_programs_too(hostile: TestClient) -> None:
    """``random.seed`` and ``sys.setrecursionlimit`` in the tests reach the program, as in pytest's one process;
    a program's own seed holds where the tests leave ``random`` alone."""
    program = (
        "import random\n\ndef roll():\n    return random.randint(1, 1000)\n\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
    )
    tests = (
        "import random\nimport sys\nfrom solution import roll, depth\n\ndef test_seeded():\n    random.seed(42)\n"
        "    expected = [random.randint(1, 1000) for _ in range(3)]\n    random.seed(42)\n"
        "    assert [roll() for _ in range(3)] == expected\n\n"
        "def test_deep():\n    sys.setrecursionlimit(10000)\n    assert depth(5000) == 5000\n"
    )
    # The same program twice in one test series: one judge, whose random state the first run's tests left seeded.
    wrong = program.replace("randint(1, 1000)", "randint(1, 1000) + 1")
    assert _verdicts(hostile, tests, [program, program + "# again\n", wrong]) == ["AC", "AC", "WA"]
    process = (
        "import os, sys\n\ndef mode():\n    return os.environ.get('MODE', 'dev')\n\ndef first():\n"
        "    return sys.argv[1]\n\ndef save(t):\n    with open('out.txt', 'w') as f:\n        f.write(t)\n"
    )
    tests = (  # the environment, sys.argv and the working directory, as monkeypatch sets them
        "import sys\nfrom solution import mode, first, save\n\ndef test_env(monkeypatch):\n"
        "    monkeypatch.setenv('MODE', 'prod')\n    assert mode() == 'prod'\n\ndef test_env_undone():\n"
        "    assert mode() == 'dev'\n\ndef test_argv(monkeypatch):\n    monkeypatch.setattr(sys, 'argv', ['p', 'x'])\n"
        "    assert first() == 'x'\n\ndef test_chdir(monkeypatch, tmp_path):\n    monkeypatch.chdir(tmp_path)\n"
        "    save('hi')\n    assert (tmp_path / 'out.txt').read_text() == 'hi'\n"
    )
    assert _verdicts(hostile, tests, [process, process.replace("'dev'", "'prod'")]) == ["AC", "WA"]
    seeded = "import random\nrandom.seed(7)\n\ndef roll():\n    return random.randint(1, 10**9)\n"
    own = (
        "import random\nexpected = random.Random(7).randint(1, 10**9)\nfrom solution import roll\n\n"
        "def test_roll():\n    assert roll() == expected\n"
    )
    assert _verdicts(hostile, own, [seeded]) == ["AC"]


def test_the_programs_warnings_reach_the_tests_filters(hostile: TestClient) -> None:
    """``pytest.warns`` sees a warning the program issues, of its own category too, as in one process."""
    program = (
        "import warnings\n\nclass OldApi(UserWarning):\n    pass\n\ndef old(x):\n"
        "    warnings.warn('old is deprecated', DeprecationWarning)\n    return x\n\n"
        "def older(x):\n    warnings.warn('older', OldApi)\n    return x\n"
    )
    tests = (
        "import pytest\nfrom solution import old, older, OldApi\n\ndef test_warns():\n"
        "    with pytest.warns(DeprecationWarning, match='deprecated'):\n        assert old(1) == 1\n\n"
        "def test_own_category():\n    with pytest.warns(OldApi):\n        older(2)\n"
    )
    silent = program.replace("warnings.warn('old is deprecated', DeprecationWarning)", "pass")
    assert _verdicts(hostile, tests, [program, silent]) == ["AC", "WA"]


# What the program returns, run as code by the tests (eval, exec, a pickle), or a file it wrote that they import:
# an exit from it is no end of the tests, and no file the program writes runs in the checker.
CODE_OF_THE_PROGRAMS = [
    ("def expr(a, b):\n    return 'exit()'\n", "assert eval(expr(2, 3)) == 5\n"),
    (
        "def gen():\n    return 'raise SystemExit(0)'\n",
        "def test_a():\n    ns = {}\n    exec(gen(), ns)\n    assert ns['x'] == 5\n",
    ),
    (
        "import pickle\n\nclass _E:\n    def __reduce__(self):\n        return (exec, ('raise SystemExit(0)',))\n\n"
        "def serialize(d):\n    return pickle.dumps(_E())\n",
        "import pickle\nassert pickle.loads(serialize({'a': 1})) == {'a': 1}\n",
    ),
    (
        "import os\n\ndef prepare(d):\n    with open(os.path.join(d, 'shapes.py'), 'w') as f:\n"
        "        f.write('raise SystemExit(0)\\n')\n    return 0\n\ndef area(r):\n    return 0\n",
        "from solution import prepare, area\n\ndef test_a(tmp_path, monkeypatch):\n"
        "    (tmp_path / 'shapes.py').write_text('def area(r):\\n    return 3.14159 * r * r\\n')\n"
        "    monkeypatch.syspath_prepend(str(tmp_path))\n    prepare(str(tmp_path))\n    import shapes\n"
        "    assert abs(area(1) - shapes.area(1)) < 1e-6\n",
    ),
]


EXITING_PICKLE = (
    "import pickle, sys\n\nclass _E:\n    def __reduce__(self):\n        return (sys.exit, (0,))\n\n"
    "def serialize(obj):\n    return pickle.dumps(_E())\n"
)
FORGED_NAME_PICKLE = (
    "import pickle\n\nclass _C:\n    def __reduce__(self):\n"
    "        return (compile, ('raise SystemExit(0)', '<tests>', 'exec'))\n\n"
    "class _E:\n    def __reduce__(self):\n        return (exec, (_C(),))\n\n"
    "def serialize(obj):\n    return pickle.dumps(_E())\n"
)
UNPICKLE_AT_TOP = "import pickle\nfrom solution import serialize\nassert pickle.loads(serialize([1])) == [1]\n"
CODE_OF_THE_PROGRAMS += [
    (EXITING_PICKLE, UNPICKLE_AT_TOP),  # sys.exit, a C function: no frame of a string's code
    (FORGED_NAME_PICKLE, UNPICKLE_AT_TOP),  # code named as the tests are
    (
        EXITING_PICKLE,
        "import pickle, pytest\nfrom solution import serialize\n\n@pytest.fixture(scope='module')\ndef m():\n"
        "    yield 1\n    pickle.loads(serialize([1]))\n\ndef test_a(m):\n    assert serialize([1]) == b'x'\n",
    ),  # a fixture's teardown, after a failed test
    (
        EXITING_PICKLE,
        "import pickle\nfrom solution import serialize\n\nclass TestA:\n    def setup_method(self):\n"
        "        pickle.loads(serialize([1]))\n\n    def test_a(self):\n        assert serialize([1]) == b'x'\n",
    ),  # a test class's hook
    (
        "def main():\n    try:\n        print('Wrong')\n    except Exception:\n        pass\n",
        "import pytest\nfrom solution import main\n\ndef test_a(monkeypatch):\n    def fake(*args, **kwargs):\n"
        "        if args != ('Hello',):\n            pytest.fail('wrong output')\n\n"
        "    monkeypatch.setattr('builtins.print', fake)\n    main()\n",
    ),  # the tests' pytest.fail() in their patch, which the program's except Exception would swallow
    (
        "def expr(a, b):\n    return \"__import__('os')._exit(0)\"\n",
        "def test_a():\n    assert eval(expr(2, 3)) == 5\n",
    ),  # the checker's process ends with status 0: the series' judge, then the run alone
    (
        "import os, pickle\n\nclass _E:\n    def __reduce__(self):\n        return (os._exit, (0,))\n\n"
        "def serialize(obj):\n    return pickle.dumps(_E())\n",
        UNPICKLE_AT_TOP,
    ),
]


@pytest.mark.parametrize(
    ("program", "tests"),
    CODE_OF_THE_PROGRAMS,
    ids=[
        *("eval", "exec", "pickle", "module-file", "c-exit", "forged-name", "teardown", "class-hook", "fail-in-patch"),
        *("os-exit-eval", "os-exit-pickle"),
    ],
)
def test_the_programs_code_the_tests_run_ends_nothing_and_passes_nothing(
    hostile: TestClient, program: str, tests: str
) -> None:
    assert _verdicts(hostile, tests, [program]) != ["AC"]


# Code of the program's the tests run (a pickle's, loaded in a test) that patches the checker's own runner: the run
# it ran in is the program's to decide (left open), but no later run is judged in that process.
POISONER = (
    "import pickle\n\nclass _E:\n    def __reduce__(self):\n        return (eval, (\"__import__('sys').modules["
    "'codegym_sandbox.agent.test_forms'].__dict__.__setitem__('_run', lambda *a, **k: None) or [1]\",))\n\n"
    "def serialize(obj):\n    return pickle.dumps(_E())\n"
)
UNPICKLING = (
    "import pickle\nfrom solution import serialize\n\ndef test_a():\n    assert pickle.loads(serialize([1])) == [1]\n\n"
    "def test_b():\n    assert pickle.loads(serialize([3])) == [3]\n"
)


def test_a_judge_where_the_programs_code_ran_judges_no_later_run(hostile: TestClient) -> None:
    wrong = "def serialize(obj):\n    return b'garbage'\n"
    honest = "import pickle\n\ndef serialize(obj):\n    return pickle.dumps(obj)\n"
    assert _verdicts(hostile, UNPICKLING, [POISONER, wrong, honest, wrong + "# again\n"])[1:] == ["RE", "AC", "RE"]


def test_no_module_the_program_wrote_is_imported_by_the_checker(hostile: TestClient) -> None:
    """A sourceless ``.pyc`` (whose code names any file it likes) in a directory the tests put on the path."""
    program = (
        "import os, marshal, importlib.util\n\ndef prepare(d):\n"
        "    code = compile('def area(r):\\n    return 0\\n', '/usr/lib/python3/dist-packages/shapes.py', 'exec')\n"
        "    os.remove(os.path.join(d, 'shapes.py'))\n"
        "    with open(os.path.join(d, 'shapes.pyc'), 'wb') as f:\n"
        "        f.write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))\n    return 0\n\n"
        "def area(r):\n    return 0\n"
    )
    tests = (
        "from solution import prepare, area\n\ndef test_a(tmp_path, monkeypatch):\n"
        "    (tmp_path / 'shapes.py').write_text('def area(r):\\n    return 3.14159 * r * r\\n')\n"
        "    monkeypatch.syspath_prepend(str(tmp_path))\n    prepare(str(tmp_path))\n    import shapes\n"
        "    assert abs(area(1) - shapes.area(1)) < 1e-6\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["RE"]


def test_a_warning_of_the_programs_shows_no_line_of_a_file_it_names(hostile: TestClient) -> None:
    program = (
        "import warnings\n\ndef f():\n    warnings.warn_explicit('look', UserWarning, '/proc/self/status', 1)\n"
        "    return 1\n"
    )
    body: dict[str, Any] = {
        "language": "python",
        "programs": [program],
        "tests": [{"assert_code": "assert f() == 1\n"}],
    }
    r = hostile.post("/v1/evaluate", json={**body, "cache": False})
    (result,) = r.json()["results"]
    assert result["verdict"] == "AC" and "look" in result["tests"][0]["stderr"], result
    assert "Name:" not in result["tests"][0]["stderr"], result  # the checker's own /proc/self/status


# logging.config.dictConfig of the program's dict calls what the dict names by dotted path: no code of a string, no
# pickle. A later run of the same tests must not be judged where that changed the checker's own modules, and an
# exit it calls is no end of the tests.
LOGGING_TESTS = (
    "import logging\nimport logging.config\nfrom solution import get_config\n\ndef test_config():\n"
    "    logging.config.dictConfig(get_config())\n    assert logging.getLogger('app').level == logging.DEBUG\n"
)
REBINDING_CONFIG = (
    "def get_config():\n    return {'version': 1, 'disable_existing_loggers': False, 'formatters': {'f': {'()': "
    "'codegym_sandbox.agent.test_forms.__dict__.update', '_run': 'ext://builtins.print'}},\n"
    "            'loggers': {'app': {'level': 'DEBUG'}}}\n"
)


def test_a_judge_whose_own_modules_changed_judges_no_later_run(hostile: TestClient) -> None:
    wrong = "def get_config():\n    return {}\n"
    assert _verdicts(hostile, LOGGING_TESTS, [REBINDING_CONFIG, wrong, wrong + "# again\n"])[1:] == ["RE", "RE"]


def test_an_exit_a_library_of_the_tests_calls_is_no_end_of_them(hostile: TestClient) -> None:
    tests = (
        "import logging\nimport logging.config\nfrom solution import get_config\n"
        "logging.config.dictConfig(get_config())\nassert logging.getLogger('app').level == logging.DEBUG\n"
    )
    exiting = "def get_config():\n    return {'version': 1, 'formatters': {'f': {'()': 'sys.exit'}}}\n"
    assert _verdicts(hostile, tests, [exiting]) != ["AC"]


def test_what_a_run_of_the_tests_set_in_the_checker_is_gone_for_the_next(hostile: TestClient) -> None:
    """The environment the tests set from a program's values (``os.environ.setdefault``) is the next run's no more
    than in a new pytest process: a later wrong program met the right one's values (round 12's R6)."""
    tests = (
        "import os\nfrom solution import default_env\n\ndef test_env():\n"
        "    for key, value in default_env().items():\n        os.environ.setdefault(key, value)\n"
        "    assert os.environ['APP_MODE'] == 'production'\n"
    )
    right = "def default_env():\n    return {'APP_MODE': 'production'}\n"
    wrong = "def default_env():\n    return {'APP_MODE': 'debug'}\n"
    assert _verdicts(hostile, tests, [right, wrong, right + "# again\n"]) == ["AC", "WA", "AC"]


def test_a_run_alone_judges_by_the_same_rules(hostile: TestClient) -> None:
    """The program's code kills the series' checker, and its run goes again alone, where the guard must be armed
    too: a pickle's sys.exit is no pass there either (round 12's R5)."""
    guards = "s.modules['codegym_sandbox.agent.import_path']._GUARDS[0].armed"
    expr = f"(lambda s: s.exit if not {guards} else (lambda c: __import__('os').kill(__import__('os').getppid(), 9)))"
    program = (
        f"import pickle\nEXPR = \"{expr}(__import__('sys'))\"\n\n"
        "class _F:\n    def __call__(self, *a):\n        pass\n\n"
        "    def __reduce__(self):\n        return (eval, (EXPR,))\n\n"
        "class _E:\n    def __reduce__(self):\n        return (_F(), (0,))\n\n"
        "def serialize(obj):\n    return pickle.dumps(_E())\n"
    )
    tests = UNPICKLE_AT_TOP.replace("[1]) == [1]", "{'a': [1, 2]}) == {'a': [1, 2]}")
    assert _verdicts(hostile, tests, [program]) != ["AC"]


# What a run's tests set in the process that judges them, from a program's values alone (a logger configured from its
# dict: no code of the program's runs, no binding of a module changes), is gone for the next run, as it would be in a
# new pytest process: each run is judged in a fork of its own.
CONFIGURED = (
    "import logging\nimport logging.config\nfrom solution import get_config\n\ndef test_config():\n"
    "    logging.config.dictConfig(get_config())\n    assert logging.getLogger('app').level == logging.DEBUG\n"
    "    assert logging.getLogger('app').propagate is False\n"
)
CONFIG = (
    "def get_config():\n    return {'version': 1, 'disable_existing_loggers': False,\n"
    "            'loggers': {'app': {'level': 'DEBUG', 'propagate': False}}}\n"
)


def test_a_logger_a_right_program_configured_passes_no_later_wrong_one(hostile: TestClient) -> None:
    wrong = "def get_config():\n    return {'version': 1}\n"
    assert _verdicts(hostile, CONFIGURED, [CONFIG, wrong]) == ["AC", "WA"]
    levelled = (
        "import logging\nfrom solution import get_level\nlogging.basicConfig(level=get_level())\n"
        "assert logging.getLogger().level == logging.INFO\n"
    )
    below = "import logging\n\ndef get_level():\n    return logging.DEBUG\n"
    right = "import logging\n\ndef get_level():\n    return logging.INFO\n"
    assert _verdicts(hostile, levelled, [below, right]) == ["WA", "AC"]


def test_what_a_programs_dict_changed_in_place_judges_no_later_run(hostile: TestClient) -> None:
    """A dotted name the dict gives ``dictConfig`` calls a method of the checker's own table (its bindings all as
    they were), or rebinds a module no watch covers: the next runs are judged as in a new process."""
    clearing = CONFIG.replace(
        "'loggers'", "'formatters': {'f': {'()': 'codegym_sandbox.agent.plain_data._MAPPINGS.clear'}},\n'loggers'"
    )
    rebinding = CONFIG.replace(
        "'loggers'",
        "'formatters': {'f': {'()': 'logging.config.__dict__.update', 'dictConfig': 'ext://builtins.len'}},\n'loggers'",
    )
    empty = "def get_config():\n    return {}\n"
    assert _verdicts(hostile, CONFIGURED, [clearing, CONFIG + "# again\n"])[1:] == ["AC"]
    assert _verdicts(hostile, CONFIGURED + "# 2\n", [rebinding, empty])[1:] != ["AC"]


def test_tests_that_call_the_program_from_many_threads_get_each_call_its_own_answer(hostile: TestClient) -> None:
    """The tests' threads call the program at once (a thread-safety test): none reads another's answer (pytest runs
    them in one process, where each call returns its own). A call made while another thread's is under way is
    refused (the program's process answers one at a time, so no race of the program's would show): the run's
    error, so a right program is RE or, where no two calls happened to meet, AC; a wrong one is never AC."""
    threads = (
        "import threading\nfrom concurrent.futures import ThreadPoolExecutor\nout = {}\n\ndef work(i):\n"
        "    out[i] = f(i)\n\nts = [threading.Thread(target=work, args=(i,)) for i in range(8)]\nfor t in ts:\n"
        "    t.start()\nfor t in ts:\n    t.join()\nassert all(out[i] == 2 * i for i in range(8)), out\n"
        "with ThreadPoolExecutor(8) as ex:\n    assert list(ex.map(f, range(100))) == [2 * i for i in range(100)]\n"
    )
    slow = "import random, time\n\ndef f(x):\n    time.sleep(random.random() / 200)\n    return 2 * x\n"
    verdicts = _verdicts(hostile, threads, ["def f(x):\n    return 2 * x\n", slow, "def f(x):\n    return x\n"])
    assert verdicts[0] in ("AC", "RE") and verdicts[1] in ("AC", "RE") and verdicts[2] in ("WA", "RE"), verdicts


def test_the_tests_process_writes_no_setting_of_the_machine(hostile: TestClient) -> None:
    """The tests' process is the box's uid 0, the host's root where the server runs as root: a path the program names
    (a logging handler's file, from its dict) must reach no sysctl and no sysrq trigger."""
    tests = (
        "import os\nfor path in ('/proc/sys/kernel/core_uses_pid', '/proc/sys/vm/drop_caches',\n"
        "             '/proc/sysrq-trigger'):\n"
        "    try:\n        os.close(os.open(path, os.O_WRONLY))\n        print('opened', path)\n    except OSError:\n"
        "        pass\nassert f(1) == 1\n"
    )
    body = {"language": "python", "programs": ["def f(x):\n    return x\n"], "tests": [{"assert_code": tests}]}
    (result,) = hostile.post("/v1/evaluate", json={**body, "cache": False}).json()["results"]
    assert result["verdict"] == "AC" and "opened" not in result["tests"][0]["stdout"], result


def test_a_call_the_tests_interrupted_leaves_no_answer_for_the_next(hostile: TestClient) -> None:
    """The tests' own signal handler raised while a call of theirs waited: its answer, late, is no later call's (a
    wrong program returned from the interrupted call what the next assert wanted)."""
    tests = (
        "import signal\n\nclass Timeout(Exception):\n    pass\n\ndef handler(signum, frame):\n    raise Timeout()\n\n"
        "signal.signal(signal.SIGALRM, handler)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)\ntry:\n    slow()\n"
        "    timed_out = False\nexcept Timeout:\n    timed_out = True\nfinally:\n"
        "    signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "assert timed_out\nassert f(1) == 1\n"
    )
    wrong = "import time\n\ndef slow():\n    time.sleep(0.5)\n    return 1\n\ndef f(x):\n    return 0\n"
    assert "AC" not in _verdicts(hostile, tests, [wrong, wrong + "# again\n"])
