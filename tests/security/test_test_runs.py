"""Tests the tests' own code runs itself, for tests that are scripts as well as pytest's (``agent/ran_tests.py``):
collection runs every test pytest would run, whether the code ran it or not. Each case's tests fail under pytest
9.2 a program right on small numbers only, and pass the right one; each was a wrong program's AC, where a run of the
code's stood for pytest's (three attack rounds: A1-A4, B1-B6, C1-C4: a run that differs from pytest's by its
arguments, the hooks and fixtures around it, its instance, its params, the state around it).
"""

from __future__ import annotations

import textwrap

import pytest
from fastapi.testclient import TestClient

from .test_test_forms import RIGHT, _verdicts

_WRONG_BIG = "def add(a, b):\n    return a + b if a < 100 else 0\n"  # right on small numbers only
_CASES_SMALL_AND_BIG = """
import unittest
class TestSmall(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(1, 2), 3)
class TestBig(unittest.TestCase):
    def test_big(self):
        self.assertEqual(add(1000, 1), 1001)
"""

CASES = {
    # A1: one function, several tests. A test method the code ran (here at top level: pytest runs that call at
    # import too) is taken for run in every class that inherits it, though pytest runs it in each (here with the
    # subclass's data). Same with a __main__ block.
    "inherited-method-top-level-call": """
        class TestOuter:
            n = 1
            def test_add(self):
                assert add(self.n, 1) == self.n + 1

        class TestBig(TestOuter):
            n = 1000

        TestOuter().test_add()
        """,
    "mixin-data-main": """
        class Checks:
            def test_add(self):
                for a, b in self.cases:
                    assert add(a, b) == a + b

        class TestSmall(Checks):
            cases = [(1, 2)]

        class TestBig(Checks):
            cases = [(1000, 1)]

        if __name__ == "__main__":
            TestSmall().test_add()
        """,
    # A1 again: one def bound to several names (a loop): the code ran one of them; pytest runs each.
    "loop-defs-main": """
        for n in (1, 1000):
            def test_add(n=n):
                assert add(n, 1) == n + 1
            globals()[f"test_add_{n}"] = test_add
        del test_add

        if __name__ == "__main__":
            test_add_1()
        """,
    # A2: a parametrized test (or one that takes a fixture) the code called once with its own argument: pytest
    # runs each case (with the fixture's value); none is run.
    "parametrized-called-in-main": """
        import pytest

        @pytest.mark.parametrize("n", [1, 1000])
        def test_add(n):
            assert add(n, 1) == n + 1

        if __name__ == "__main__":
            test_add(1)
        """,
    "fixture-test-called-in-main": """
        import pytest

        @pytest.fixture
        def n():
            return 1000

        def test_add(n):
            assert add(n, 1) == n + 1

        if __name__ == "__main__":
            test_add(1)
        """,
    # A3 (no script at all): what the checker's own run of a collected test records counts as "the code ran it"
    # for every class run after it: a test that calls another class's test method drops that method.
    "test-calls-later-class-method": """
        def test_quick():
            t = TestAdd()
            t.n = 1
            t.test_add()

        class TestAdd:
            def setup_method(self):
                self.n = 1000
            def test_add(self):
                assert add(self.n, 1) == self.n + 1
        """,
    "class-test-calls-next-class-test": """
        class TestSmall:
            def test_small(self):
                TestBig().test_big(1)

        class TestBig:
            def test_big(self, n=1000):
                assert add(n, 1) == n + 1
        """,
    # A4: __test__ said other than `name.__test__ = ...` (the form compiled() looks for): the function records
    # nothing, and a name the code loads is taken for run.
    "test-attr-by-setattr": """
        def verify_big():
            assert add(1000, 1) == 1001
        setattr(verify_big, "__test__", True)

        def test_small():
            assert add(1, 2) == 3
        """,
    "test-attr-in-a-loop": """
        def verify_small():
            assert add(1, 2) == 3
        def verify_big():
            assert add(1000, 1) == 1001
        for f in (verify_small, verify_big):
            f.__test__ = True
        """,
    "test-attr-by-dict": """
        def verify_big():
            assert add(1000, 1) == 1001
        verify_big.__dict__["__test__"] = True

        def test_small():
            assert add(1, 2) == 3
        """,
    "test-attr-by-decorator": """
        def as_test(f):
            f.__test__ = True
            return f

        @as_test
        def verify_big():
            assert add(1000, 1) == 1001

        def test_small():
            assert add(1, 2) == 3

        ALL = [verify_big, test_small]
        """,
    # B1: the code gave an argument pytest does not give (a default, **kwargs): pytest runs the default.
    "default-arg-top-level": """
        def test_add(n=1000):
            assert add(n, 1) == n + 1

        test_add(1)
        """,
    "kwonly-default-main": """
        def test_add(*, n=1000):
            assert add(n, 1) == n + 1

        if __name__ == "__main__":
            test_add(n=1)
        """,
    "kwargs-main": """
        def test_add(**kw):
            n = kw.get("n", 1000)
            assert add(n, 1) == n + 1

        if __name__ == "__main__":
            test_add(n=1)
        """,
    # B2: parametrize that _parametrized does not see: the module's pytestmark, an enclosing class's mark,
    # pytest_generate_tests.
    "module-pytestmark-parametrize": """
        import pytest
        pytestmark = pytest.mark.parametrize("n", [1, 1000])

        def test_add(n):
            assert add(n, 1) == n + 1

        if __name__ == "__main__":
            test_add(1)
        """,
    "module-pytestmark-parametrize-method": """
        import pytest
        pytestmark = [pytest.mark.parametrize("n", [1, 1000])]

        class TestAdd:
            def test_add(self, n):
                assert add(n, 1) == n + 1

        TestAdd().test_add(1)
        """,
    "outer-class-parametrize-nested": """
        import pytest

        @pytest.mark.parametrize("n", [1, 1000])
        class TestOuter:
            class TestInner:
                def test_add(self, n):
                    assert add(n, 1) == n + 1

        if __name__ == "__main__":
            TestOuter.TestInner().test_add(1)
        """,
    # B3: what pytest runs around the test (xunit hooks, autouse fixtures, usefixtures), the code's call did not.
    "setup-method-top-level": """
        class TestAdd:
            n = 1
            def setup_method(self):
                self.n = 1000
            def test_add(self):
                assert add(self.n, 1) == self.n + 1

        TestAdd().test_add()
        """,
    "setup-function-top-level": """
        N = 1
        def setup_function(f):
            global N
            N = 1000

        def test_add():
            assert add(N, 1) == N + 1

        test_add()
        """,
    "autouse-fixture-top-level": """
        import pytest
        N = 1

        @pytest.fixture(autouse=True)
        def big():
            global N
            N = 1000

        def test_add():
            assert add(N, 1) == N + 1

        test_add()
        """,
    "usefixtures-main": """
        import pytest
        N = 1

        @pytest.fixture
        def big():
            global N
            N = 1000

        @pytest.mark.usefixtures("big")
        def test_add():
            assert add(N, 1) == N + 1

        if __name__ == "__main__":
            test_add()
        """,
    # B4: the instance the code ran the method on is not the fresh one pytest makes.
    "instance-state-top-level": """
        class TestAdd:
            n = 1000
            def test_add(self):
                assert add(self.n, 1) == self.n + 1

        t = TestAdd()
        t.n = 1
        t.test_add()
        """,
    # B5: one definition made into several methods in a class body's loop (shared() looks at the module only).
    "class-body-loop": """
        class TestAdd:
            for n in (1, 1000):
                def test_add(self, n=n):
                    assert add(n, 1) == n + 1
                locals()[f"test_add_{n}"] = test_add
            del test_add, n

        TestAdd().test_add_1()
        """,
    # B6: a def in a match statement's case records nothing (_collectable skips `cases`): named, it is dropped.
    "def-in-match-named": """
        import sys
        match sys.version_info.major:
            case 3:
                def test_big():
                    assert add(1000, 1) == 1001

        TESTS = [test_big]
        """,
    # A later round's C1-C4: a plain alias of a helper, __slots__, state around a top-level call, a thread.
    # C1: no record at all (a test bound to a function that is not test*/check*): "named = ran" fallback, reached
    # by a plain alias, no factory. Pure pytest files: nothing runs the test at all.
    "alias-of-helper-named": """
        def _big():
            assert add(1000, 1) == 1001
        test_big = _big
        ALL = [test_big]
        """,
    "alias-in-class-body-named": """
        def _check(self):
            assert add(self.n, 1) == self.n + 1
        class TestBig:
            n = 1000
            test_add = _check
            TESTS = [test_add]
        """,
    "lambda-wraps-main-print": """
        import functools
        def big():
            assert add(1000, 1) == 1001
        test_big = functools.wraps(big)(lambda: big())
        if __name__ == "__main__":
            print(test_big.__name__)
        """,
    # C2: instance state the fresh-instance check (empty __dict__) does not see: __slots__.
    "slots-instance-state-main": """
        class TestAdd:
            __slots__ = ("n",)
            def test_add(self):
                n = getattr(self, "n", 1000)
                assert add(n, 1) == n + 1
        if __name__ == "__main__":
            t = TestAdd(); t.n = 1; t.test_add()
        """,
    # C3: state around the call that is not the call's: module globals, class attributes, the program's names.
    "global-changed-after-top-level-call": """
        N = 1
        def test_add():
            assert add(N, 1) == N + 1
        test_add()
        N = 1000
        """,
    "class-attribute-changed-after-top-level-call": """
        class TestAdd:
            n = 1
            def test_add(self):
                assert add(self.n, 1) == self.n + 1
        TestAdd().test_add()
        TestAdd.n = 1000
        """,
    "mock-patch-in-main": """
        from unittest import mock
        def test_add():
            assert add(1000, 1) == 1001
        if __name__ == "__main__":
            with mock.patch(__name__ + ".add", lambda a, b: a + b):
                test_add()
        """,
    # C4: a failing call whose failure does not stop the script (a thread at top level: pytest runs it at import,
    # warns, then collects the test again and fails it).
    "thread-at-top-level": """
        import threading
        def test_add():
            assert add(1000, 1) == 1001
        t = threading.Thread(target=test_add); t.start(); t.join()
        """,
    # D2 (round 22): unittest.main() that ran some of the cases stood for all of them, in tests without pytest.
    # pytest runs every case (and never reads load_tests).
    "unittest-main-default-test": _CASES_SMALL_AND_BIG
    + "if __name__ == '__main__':\n    unittest.main(defaultTest='TestSmall')\n",
    "unittest-main-argv": _CASES_SMALL_AND_BIG
    + "if __name__ == '__main__':\n    unittest.main(argv=['x', 'TestSmall'])\n",
    "unittest-load-tests": _CASES_SMALL_AND_BIG
    + "def load_tests(loader, tests, pattern):\n    return loader.loadTestsFromTestCase(TestSmall)\n"
    + "if __name__ == '__main__':\n    unittest.main()\n",
    "unittest-test-program": _CASES_SMALL_AND_BIG + "unittest.TestProgram(defaultTest='TestSmall')\n",
    # D4 (round 22): a fixture whose scope is a callable was made for each test: the gathered results were new for
    # each, and the check saw none.
    "callable-fixture-scope": """
        import pytest
        def scope(fixture_name, config):
            return "module"
        @pytest.fixture(scope=scope)
        def results():
            return []
        def test_gather(results):
            results.append((add(1000, 1), 1001))
        def test_check(results):
            assert results
            for got, want in results:
                assert got == want
        """,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_test_the_code_did_not_run_as_pytest_would_is_run(hostile: TestClient, case: str) -> None:
    assert _verdicts(hostile, textwrap.dedent(CASES[case]), [_WRONG_BIG, RIGHT]) == ["WA", "AC"]


_WARNS = "import warnings\ndef add(a, b):\n    warnings.warn('old', DeprecationWarning)\n    return a + b\n"


@pytest.mark.parametrize(
    "marks",
    [
        '@pytest.mark.filterwarnings("error")\n',
        '@pytest.mark.filterwarnings("ignore::UserWarning", "error::DeprecationWarning")\n',
        "",  # the module's, below
    ],
)
def test_a_filterwarnings_mark_makes_the_programs_warning_an_error(hostile: TestClient, marks: str) -> None:
    # D3 (round 22): the marks were not applied, and a test marked so passed a program that warns.
    module = "" if marks else 'pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")\n'
    tests = f"import pytest\n{module}{marks}def test_add():\n    assert add(1, 2) == 3\n"
    # The program's warning, an error there, is raised at its call as its exceptions are: its runtime error.
    assert _verdicts(hostile, tests, [_WARNS, RIGHT]) == ["RE", "AC"]
    # And a filter that ignores it leaves the program's warning as pytest would: the test passes.
    ignoring = 'import pytest\n@pytest.mark.filterwarnings("ignore")\ndef test_add():\n    assert add(1, 2) == 3\n'
    assert _verdicts(hostile, ignoring, [_WARNS]) == ["AC"]


@pytest.mark.parametrize("where", ["method", "class", "module"])
def test_a_filterwarnings_mark_holds_for_a_unittest_case(hostile: TestClient, where: str) -> None:
    # pytest runs a unittest case's test under the marks of its method, its class and its module alike.
    mark = '@pytest.mark.filterwarnings("error::DeprecationWarning")\n'
    module = 'pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")\n' if where == "module" else ""
    tests = (
        f"import pytest\nimport unittest\n{module}{mark if where == 'class' else ''}"
        "class T(unittest.TestCase):\n"
        f"{'    ' + mark if where == 'method' else ''}    def test_add(self):\n"
        "        self.assertEqual(add(1, 2), 3)\n"
    )
    assert _verdicts(hostile, tests, [_WARNS, RIGHT]) == ["RE", "AC"]
