"""unittest's cases that the checker collects (``test_forms``), run as pytest runs them: in unittest's own suite and
runner (``setUpClass`` and its teardowns, unittest's ``skip`` and ``expectedFailure``, ``subTest``), under pytest's
marks on the case's method, on its class, and around it (an outer test class's, the module's ``pytestmark``), and in
the pytest fixtures each test uses (autouse ones, the module's, an outer class's and its own, those ``usefixtures``
names), pytest's xunit hooks among them (``setup_method``, ``setup_class`` and their teardowns): an error in one is the
test's, as pytest's; left out, a fixture whose teardown checks the program passed any.

pytest applies ``skip``, ``skipif`` and ``xfail`` to a case's methods as to its own test functions: a case it skips
is not run (nor a class's ``setUpClass`` where it skips all of the class's), one it expects to fail passes where it
fails as the mark says, and fails where it passes under ``strict``; ``pytest.skip()``, ``xfail()`` and ``fail()`` in a
case are its outcomes, as in a test function. Left out, an honest program failed a case that pytest skips.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any

from . import pytest_marks
from .fixture_requests import Definition, Fixtures, Made, definition


def run(cases: list[type], unittest: types.ModuleType, marks: list[object], fixtures: Fixtures) -> None:
    """Run ``cases`` in one suite, each test under its marks and ``marks`` (those around the cases), in the pytest
    fixtures it uses of ``fixtures`` (those around the cases) and of its class's own: an error of theirs raises
    ``RuntimeError``, a failure ``AssertionError``."""
    suite, expected = _suite_class(unittest)(), _Expected()
    with contextlib.ExitStack() as classes:
        for case in cases:
            of_case = classes.enter_context(fixtures.of_class(case))
            _xunit_fixtures(case, fixtures, of_case)
            early = Made()  # the class's scope's autouse fixtures of those around it: made before setUpClass
            for hook in ("setUpClass", "tearDownClass"):
                _class_outcomes(
                    case, hook, unittest, (of_case, fixtures, early), [*pytest_marks.of_class(case), *marks]
                )
            for test in unittest.defaultTestLoader.loadTestsFromTestCase(case):
                method = getattr(case, str(getattr(test, "_testMethodName", "")), None)
                if getattr(method, "__test__", True) is False:
                    continue  # pytest leaves a case's method that says so
                own = [*pytest_marks.marks_of(getattr(method, "pytestmark", None)), *pytest_marks.of_class(case)]
                own += marks
                if pytest_marks.skipped(own):
                    continue
                xfail = pytest_marks.xfail(own)
                if xfail is not None and not xfail.run:
                    continue  # xfail(run=False): pytest reports it xfailed, unrun
                if xfail is not None:
                    expected[id(test)] = (test, xfail)
                _in_fixtures(test, of_case, own, fixtures)
                suite.addTest(test)
        resultclass = _result_class(unittest, expected)
        result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=resultclass).run(suite)
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} of the tests' cases raised an error")
    if not result.wasSuccessful():  # a failure, or an expected failure that passed
        raise AssertionError("the tests' cases failed")


def _class_outcomes(
    case: type, name: str, unittest: types.ModuleType, made: tuple[Fixtures, Fixtures, Made], marks: list[object]
) -> None:
    """pytest's outcomes that a case's ``setUpClass`` or ``tearDownClass`` raises, as pytest takes them: a skip or
    an xfail in ``setUpClass`` skips the class's tests (xfailed, they pass), one in ``tearDownClass`` changes no
    test's outcome, and ``pytest.fail()`` in either is the class's error. unittest's suite catches ``Exception``
    alone, and pytest's outcomes are not: they left the suite, and an honest program was the tests' error.

    And pytest's order around them: the fixtures of a scope wider than the class's (``marks``' and autouse ones)
    made before ``setUpClass``, and the autouse ones of the class's scope that those around it define (``made``:
    the case's fixtures, those around it, and where the latter are kept), ended after ``tearDownClass``; the class's
    own ended before it."""
    hook = getattr(case, name)
    fixtures, around, early = made

    def outcome(cls: type) -> None:
        try:
            if name == "setUpClass":
                fixtures.before_class(marks)
                _around_class(around, early)
                if fixtures.test_class is not None:
                    fixtures.test_class.values.update(early.values)  # made once: the case's tests take them
                hook()
                return
            try:
                fixtures.close_class()
            finally:
                try:
                    hook()
                finally:
                    early.stack.close()
        except (pytest_marks.pytest_class("Skipped"), pytest_marks.pytest_class("XFailed")) as exc:
            if name == "setUpClass":
                raise unittest.SkipTest(str(exc)) from None
        except pytest_marks.pytest_class("Failed") as exc:
            raise AssertionError(str(exc)) from None

    setattr(case, name, classmethod(outcome))


def _in_fixtures(test: Any, fixtures: Fixtures, marks: list[object], around: Fixtures) -> None:
    """``test`` run as pytest runs a case's test: in the fixtures it uses (autouse ones, those of ``usefixtures``
    ``marks``), made before its ``setUp`` and ended after its ``tearDown``. An error in one is the test's error
    (a skip there skips it), before the test where a fixture's setup raised, after it where a teardown did.

    Of a class unittest skips, pytest makes only what comes before the skip it puts at the class's scope: those of
    a wider scope, and the class's scope's autouse ones of ``around`` (the module's, an outer class's); a module's
    fixture whose teardown checks the program runs around a skipped class too."""
    run = test.run
    skipped = getattr(type(test), "__unittest_skip__", False)

    def in_fixtures(result: Any) -> None:
        caught = (Exception, pytest_marks.pytest_class("OutcomeException"))  # what pytest makes a test's outcome
        made = contextlib.ExitStack()
        try:
            if skipped:
                fixtures.before_class(marks)
                if fixtures.test_class is not None:  # of_class made it: the class's scope, ended with the class
                    _around_class(around, fixtures.test_class)
            else:  # its filterwarnings marks in force around it and its fixtures, as pytest puts them
                made.enter_context(pytest_marks.warning_filters(marks))
                fixtures.used(marks, made, test)
        except caught:
            result.startTest(test)
            result.addError(test, sys.exc_info())
            result.stopTest(test)
        else:
            run(result)
        finally:
            try:
                made.close()
            except caught:
                result.addError(test, sys.exc_info())

    test.run = in_fixtures


def _around_class(around: Fixtures, kept: Made) -> None:
    """Make the autouse fixtures of the class's scope that ``around`` defines (the module's, an outer class's) and
    keep them in ``kept``, as pytest makes them before anything of a case's class: its ``setUpClass``, its skip."""
    Fixtures(around.defined, around.builtin, around.module, kept).used([], kept.stack, None, ("class",))


def _xunit_fixtures(case: type, around: Fixtures, fixtures: Fixtures) -> None:
    """pytest's xunit hooks on a unittest case, as the autouse fixtures pytest makes of them: ``setup_method`` and
    ``teardown_method`` around each test (the method's scope), ``setup_class`` and ``teardown_class`` around the
    class's tests (after ``setUpClass``, before ``tearDownClass``), each after the fixtures of ``around`` (the
    module's, an outer class's) and before the class's own. Left out, an assertion there passed any program."""
    own = [hook for hook in ("setup_method", "teardown_method", "setup_class", "teardown_class") if _hook(case, hook)]
    if not own:
        return
    holder = next((found.holder for found in fixtures.defined.values() if isinstance(found.holder, case)), None)
    holder = holder if holder is not None else case("runTest")  # as pytest's collection makes one
    made: dict[str, Definition] = {}
    if "setup_method" in own or "teardown_method" in own:
        step = _method_hooks(_hook(case, "setup_method"), _hook(case, "teardown_method"))
        made["_xunit_setup_method"] = Definition("_xunit_setup_method", step, "function", None, True, holder)
    if "setup_class" in own or "teardown_class" in own:
        step = _class_hooks(case, _hook(case, "setup_class"), _hook(case, "teardown_class"))
        made["_xunit_setup_class"] = Definition("_xunit_setup_class", step, "class", None, True, holder)
    first = {name: found for name, found in fixtures.defined.items() if around.defined.get(name) is found}
    fixtures.defined = {**first, **made, **{k: v for k, v in fixtures.defined.items() if k not in first}}


def _hook(case: type, name: str) -> Any:
    """The case's hook ``name``, as pytest finds it: an attribute of the class that is no fixture; else None."""
    for base in case.__mro__:
        if name in vars(base):
            return getattr(case, name) if definition(vars(base)[name]) is None else None
    return None


def _method_hooks(setup: Any, teardown: Any) -> Any:
    def xunit(self: Any) -> Any:
        method = getattr(self, str(getattr(self, "_testMethodName", "")), None)
        if setup is not None:
            setup(self, method)
        yield
        if teardown is not None:
            teardown(self, method)

    return xunit


def _class_hooks(case: type, setup: Any, teardown: Any) -> Any:
    def call(hook: Any) -> None:
        function = getattr(hook, "__func__", hook)  # a classmethod's function, given the class as pytest gives it
        if function.__code__.co_argcount:
            function(case)
        else:
            function()

    def xunit(self: Any) -> Any:
        if setup is not None:
            call(setup)
        yield
        if teardown is not None:
            call(teardown)

    return xunit


def _suite_class(unittest: types.ModuleType) -> type:
    """unittest's suite, less its module's ``setUpModule`` and ``tearDownModule``: pytest runs those itself, once
    around all of the module's tests (``test_forms``); the suite ran them again around its cases."""

    class Suite(unittest.TestSuite):  # type: ignore[name-defined,misc]
        def _handleModuleFixture(self, test: Any, result: Any) -> None:
            pass

        def _handleModuleTearDown(self, result: Any) -> None:
            pass

    return Suite


class _Expected(dict[int, tuple[object, pytest_marks.Expected]]):
    """The ``xfail`` marks of tests, by their ids: each kept with its test, which unittest's suite lets go of once
    run (an object made later, a class's error, could take its id)."""

    def of(self, test: object) -> pytest_marks.Expected | None:
        found = self.get(id(test))
        return found[1] if found is not None and found[0] is test else None


def _result_class(unittest: types.ModuleType, expected: _Expected) -> type:
    """unittest's result, where a test that ``expected`` holds an ``xfail`` of is judged as pytest judges it."""

    # The tests' own unittest module, never imported here: its classes are untyped to mypy.
    class Result(unittest.TextTestResult):  # type: ignore[name-defined,misc]
        def addError(self, test: Any, err: Any) -> None:
            # pytest's outcomes that a case, its setUp or its class's raise: skipped, xfailed, failed, as in pytest.
            if issubclass(err[0], (pytest_marks.pytest_class("Skipped"), unittest.SkipTest)):
                self.addSkip(test, str(err[1]))  # unittest's skip too, raised in a fixture or an xunit hook
            elif issubclass(err[0], pytest_marks.pytest_class("XFailed")):
                self.addExpectedFailure(test, err)
            elif issubclass(err[0], pytest_marks.pytest_class("Failed")):
                self.addFailure(test, err)
            elif not self._failed_as_expected(test, err):
                super().addError(test, err)

        def addFailure(self, test: Any, err: Any) -> None:
            if not self._failed_as_expected(test, err):
                super().addFailure(test, err)

        def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
            xfail = expected.of(test)
            if xfail is not None and xfail.strict:
                # pytest fails a strict xfail's test that runs subtests, whatever each of them does.
                try:
                    raise AssertionError(f"{test} runs subtests under xfail(strict=True)")
                except AssertionError:
                    super().addSubTest(test, subtest, err or sys.exc_info())
            elif err is None or not self._failed_as_expected(test, err):
                super().addSubTest(test, subtest, err)

        def addSuccess(self, test: Any) -> None:
            xfail = expected.of(test)
            if xfail is None or not xfail.strict:
                super().addSuccess(test)  # an xfail test that passes passes, as pytest's XPASS
                return
            try:
                raise AssertionError(f"{test} passed, and its xfail(strict=True) says it must not")
            except AssertionError:
                super().addFailure(test, sys.exc_info())

        def _failed_as_expected(self, test: Any, err: Any) -> bool:
            xfail = expected.of(test)
            if xfail is None or not xfail.catches(err[1]):
                return False
            self.addExpectedFailure(test, err)
            return True

    return Result
