"""The forms assert tests come in besides plain statements, run as their own runners would: pytest's
test functions and unittest's cases, in the scope ``python main.py`` gives them (Python's ``__main__``).

Test code that only defines ``def test_add(): assert ...`` runs nothing by itself: judged as plain statements,
any program passed it. Test code that ends in ``unittest.main()`` loads its cases from ``sys.modules["__main__"]``
and ends with ``SystemExit``: judged in a scope of its own, it found no case and every program failed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from . import call_test, collect_order, import_path, program_names, pytest_marks, ran_tests, unittest_cases
from .fixture_requests import TESTS_FILE, Builtin, Fixtures, requested, setup_error, theirs, wrapped
from .program_errors import program_traceback
from .program_function import ProgramFunction
from .program_handle import Handle

# A code object's flags of a generator, a coroutine and an async generator (``inspect``'s, which the agent does
# not import: every program is forked from it).
_NOT_RUNNABLE = 0x20 | 0x80 | 0x200


class Asserts(NamedTuple):
    """Assert tests, compiled, with the names the task declares the program's (its entry point): asked of the
    program even where a builtin has that name (``def sorted``), as Python's own scope would take them."""

    code: types.CodeType
    declared: frozenset[str]
    whole_file: bool = False  # a ``pytest`` file's tests (``program_names.WHOLE_FILE``)


Tests = Asserts | call_test.Call


def read_tests(text: str) -> Tests:
    """The tests a run's stdin holds after the program: a call test, or assert tests (compiled), the task's
    declared names first where it has any (``program_names.DECLARED``, a line of its own)."""
    if text.startswith(call_test.MARK):
        return call_test.parse(text)
    whole_file = text.startswith(program_names.WHOLE_FILE)
    text = text.removeprefix(program_names.WHOLE_FILE)
    declared = frozenset[str]()
    if text.startswith(program_names.DECLARED):
        names, _, text = text[len(program_names.DECLARED) :].partition("\n")
        declared = frozenset(names.split())
    return Asserts(ran_tests.compiled(text), declared, whole_file)


def ended_well(exc: SystemExit, code: types.CodeType | None = None) -> bool:
    """Whether the tests' own ``sys.exit`` (unittest's ``main`` ends with one) says they passed: as Python's exit
    status would, 0 only for ``None`` or an int 0 (``sys.exit(0.0)`` prints and exits 1); and only one the tests'
    code raised, never one of code run from a string (``eval`` of what the program returned: ``exit()``, a pickle
    of the program's) or from a file the program could write (see :func:`foreign`), nor the program's own exit
    passed on (``program_errors.ProgramExit``)."""
    if program_traceback(exc) is not None or foreign(exc, code) or import_path.ran_foreign_code():
        return False
    return exc.code is None or (type(exc.code) in (int, bool) and exc.code == 0)


def foreign(exc: BaseException, code: types.CodeType | None = None) -> bool:
    """Whether code that is not the tests' own, nor a library's, raised ``exc`` or passed it on: code compiled from a
    string (``<string>``, or named as the tests are, but not theirs: ``code``'s), or from a file under the run's
    directory, which the program can write."""
    here, own = os.getcwd() + os.sep, import_path.code_objects(code)
    runner = getattr(sys.modules.get("unittest.main"), "__file__", None)  # unittest.main() ends with its exit
    # The builtins' ``exit()`` and ``quit()`` (``site``'s, which the checker may run after its modules load): an exit
    # the tests call, as ``sys.exit``, which raises what it is given (round 60).
    quitter = vars(getattr(sys.modules.get("_sitebuiltins"), "Quitter", object)).get("__call__")
    tb = exc.__traceback__
    while tb is not None:
        frame_code = tb.tb_frame.f_code
        name = frame_code.co_filename
        if frame_code is getattr(quitter, "__code__", None):
            tb = tb.tb_next
            continue
        if name.startswith("<") and not (name == TESTS_FILE and (code is None or frame_code in own)):
            return True
        if name.startswith(here):
            return True
        if code is not None and not name.startswith(("<", _AGENT)) and name != runner:
            return True  # a library the tests called exited (``logging.config`` calling what the program named)
        tb = tb.tb_next
    return False


def outcome_of(exc: BaseException) -> str:
    """``failed`` for an assertion of the tests' that failed (pytest's ``fail``, ``pytest.raises`` that saw no
    error: ``Failed``); ``error`` for any other exception, the program's own among them (an ``AssertionError``
    of the program's too)."""
    if program_traceback(exc) is not None:
        return "error"
    outcomes = sys.modules.get("_pytest.outcomes")  # imported by tests that use pytest, never by the program
    failed = getattr(outcomes, "Failed", AssertionError)
    return "failed" if isinstance(exc, (AssertionError, failed)) else "error"


def run_collected(code: types.CodeType, *args: Any, **kwargs: Any) -> None:
    """:func:`collect_and_run`, where an exit is no end of the tests: nothing it runs (a test, a fixture's setup or
    teardown, a class's hook) ends them as passed, as pytest fails an exit there."""
    try:
        with pytest_marks.strict(bool(kwargs.get("whole_file"))):
            collect_and_run(code, *args, **kwargs)
    except SystemExit as exc:
        raise RuntimeError(f"the tests' collected tests exited ({exc.code!r}): no exit there is a pass") from None


def collect_and_run(
    code: types.CodeType,
    scope: dict[str, object],
    declared: frozenset[str],
    ran: set[str],
    builtin: Builtin = MappingProxyType({}),
    whole_file: bool = False,
) -> None:
    """Run what pytest would collect from the tests' scope once their code ran (whether it ended in an exit that
    says it passed or not: ``unittest.main()`` runs nothing, see ``test_scope``). An assertion
    of theirs that fails raises, as it would have in the code; a test that cannot be run here (it needs a fixture
    of pytest's but ``fixtures``, or is a coroutine) is the tests' error, never a pass; a test with
    ``pytest.mark.parametrize`` marks (its own, its class's, the module's) runs once per case. A test the code ran
    itself (``ran``) is run again, as pytest runs it (``ran_tests``: only what pytest cannot run, and the code ran,
    is the script's alone).

    - HumanEval's ``check`` that the code never calls: called with the task's declared entry point, as HumanEval's
      harness does.
    - pytest's ``test*`` functions.
    - pytest's ``Test*`` classes (no ``unittest.TestCase``, no ``__init__`` of their own or inherited): each
      ``test*`` method (inherited too) on a new instance, between ``setup_method`` and ``teardown_method``, all of
      them between the class's ``setup_class`` and ``teardown_class``.
    - unittest's cases, every one (whatever unittest's runner would select), under pytest's marks
      (``unittest_cases``): the module's, and those of the test classes they are in; in pytest's fixtures, as
      those of the test classes' methods.

    And pytest's module hooks (``setup_module`` or unittest's ``setUpModule``, and their teardowns) once around all
    of them.
    """
    marks = pytest_marks.marks_of(scope.get("pytestmark"))
    done = set(ran)  # what the code ran, before collection runs anything (what it runs records too)
    check = scope.get("check")
    if theirs(check) and ran_tests.key(check) not in done and len(declared) == 1:
        (entry,) = declared
        if entry in scope:
            check(scope[entry])  # as HumanEval's harness does, where the tests' code did not call it (a route's does)
    unittest = sys.modules.get("unittest")
    fixtures = Fixtures.of(scope, builtin)
    module = sys.modules.get("__main__")
    collected = [
        (name, value)
        for name, value in list(scope.items())
        if collect_order.pytest_name(name, value, ("test", "Test"))
        and (
            (_collected(name, value) and not ran_tests.scripts_alone(value, False, fixtures, marks, done))
            or (isinstance(value, type) and collect_order.pytest_class(value, unittest))
        )
    ]
    cases = collect_order.cases(scope, unittest)
    if whole_file and not (collected or cases):
        # A pytest file whose tests were all made something pytest does not collect (a completion's last line, a
        # decorator of the file's first test: ``@pytest.fixture``) ran none, and passed (round 60).
        raise AssertionError("no tests ran: pytest collects none of the file's tests as they are once it ran")
    # pytest's module hooks, once around all it collects (unittest's cases too).
    try:
        if collected or cases:
            try:
                _hook(scope, ("setUpModule", "setup_module"), module)
            except _skips(unittest):  # pytest skips all of the module's tests, and runs no teardown hook
                pytest_marks.no_pass("is skipped with the module")
                return
        # In the order the tests define them, unittest's cases among the rest (collect_order).
        tests, case_ids = dict(collected), {id(case) for case in cases}
        for name, value in list(scope.items()):
            if unittest is not None and isinstance(value, type) and id(value) in case_ids:
                unittest_cases.run([value], unittest, marks, fixtures)
            elif name not in tests or tests[name] is not value:
                continue
            elif isinstance(value, type):
                with fixtures.of_class(value) as of_class:
                    _run_class(value, marks, of_class, done)
            else:
                if "setup_function" in scope:
                    fixtures.before_class(marks)  # as setup_class: a fixture of the test's scope, made after those
                _hook(scope, ("setup_function",), value)
                try:
                    _run(value, marks, fixtures)
                finally:
                    _hook(scope, ("teardown_function",), value)
    finally:
        fixtures.close()
    if collected or cases:
        _hook(scope, ("tearDownModule", "teardown_module"), module)


def _skips(unittest: types.ModuleType | None) -> tuple[type[BaseException], ...]:
    """What a module's setup hook raises to skip its tests: pytest's skip and xfail, unittest's ``SkipTest``."""
    found = [pytest_marks.pytest_class("Skipped"), pytest_marks.pytest_class("XFailed")]
    return (*found, unittest.SkipTest) if unittest is not None else tuple(found)


def _hook(scope: dict[str, Any], names: tuple[str, ...], subject: object) -> None:
    """The tests' own ``setup_module``/``setup_function`` (and teardowns; the first of ``names`` they bind, as
    pytest takes unittest's ``setUpModule`` for its ``setup_module``), if they define one: given its subject where
    it takes one, as pytest gives it."""
    hook = next((found for name in names if (found := scope.get(name)) is not None), None)
    if theirs(hook):
        with setup_error(hook.__name__):
            hook(subject) if hook.__code__.co_argcount else hook()


_AGENT = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the checker's own code: stand-ins, fixtures


def _collected(name: str, value: object) -> bool:
    """Whether pytest collects ``value``, bound to a ``test*`` name: a function, the tests' own and a library
    decorator's wrapper of one (``mock.patch``'s, ``lru_cache``'s, a class's whose instance wraps one: each says
    which, as ``functools.wraps`` does; left out, a test so decorated passed any program); never the checker's own (a
    stand-in for a function of the program's), nor the program's object. A callable of the tests' that wraps no
    function (a ``functools.partial``) pytest does not run either: here it is the tests' error, never a pass."""
    if isinstance(value, (type, Handle)) or type(value) is ProgramFunction or not callable(value):
        return False
    function = wrapped(value)
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"{name} is a callable that runs no function: no runner collects it as a test")
    return not function.__code__.co_filename.startswith(_AGENT)


def _run_class(cls: type, marks: list[object], fixtures: Fixtures, done: set[str]) -> None:
    """A pytest class's tests and those of the classes pytest collects in it (its ``Test*`` classes, unittest's
    cases; a class bound to a test* name is none), in the order it defines them (``collect_order``); all of them
    between its ``setup_class`` and ``teardown_class``, its nested classes' too."""
    own = [*pytest_marks.of_class(cls), *marks]  # the closest first: this class's, then what is around it
    unittest = sys.modules.get("unittest")
    items: list[tuple[str, Any]] = []
    members = collect_order.class_members(cls)
    for name, value in members:
        if isinstance(value, type):
            if value is not cls and value.__module__ == "__main__" and not name.startswith("__"):
                items.append((name, value))
        elif (
            collect_order.pytest_name(name, value, "test")
            and callable(value)
            and not ran_tests.scripts_alone(value, True, fixtures, own, done)
        ):
            items.append((name, value))
    if not items:
        return  # nothing of it pytest runs: no hook either
    if hasattr(cls, "setup_class"):  # an assertion in an xunit hook is an error, as in a fixture (pytest's are)
        fixtures.before_class(own)  # pytest's hook is a fixture of the class's scope: made after the wider ones
        with setup_error("setup_class"):
            cls.setup_class()
    try:
        for name, value in items:
            if not isinstance(value, type):
                _run_method(cls, name, own, fixtures)
            elif unittest is not None and issubclass(value, unittest.TestCase):
                if collect_order.said(value) is not False:
                    unittest_cases.run([value], unittest, own, fixtures)
            elif collect_order.pytest_name(name, value, "Test") and collect_order.pytest_class(value, unittest):
                with fixtures.of_class(value) as of_inner:
                    _run_class(value, own, of_inner, done)
    finally:
        if hasattr(cls, "teardown_class"):
            with setup_error("teardown_class"):
                cls.teardown_class()


def _run_method(cls: type, name: str, marks: list[object], fixtures: Fixtures) -> None:
    """One test method of a pytest class, on a new instance, between ``setup_method`` and ``teardown_method``."""
    instance = cls()
    test = getattr(instance, name)
    for hook in ("setup_method", None, "teardown_method"):
        if hook is None:
            _run(test, marks, fixtures, instance)
        elif hasattr(instance, hook):  # pytest passes the test to a hook that takes it
            step = getattr(instance, hook)
            with setup_error(hook):
                step(test) if step.__code__.co_argcount > 1 else step()


def _run(
    test: Any,
    marks: Sequence[object],
    fixtures: Fixtures,
    instance: object = None,
) -> None:
    """``test`` run as pytest runs it: once, or once per case of its ``pytest.mark.parametrize`` marks (and its
    class's, ``marks``) and per param of the parametrized fixtures it takes; each argument no mark gives is a
    fixture (``fixtures``: made for that run, ended after it, or kept for its scope); one that none gives is the
    tests' ``TypeError``."""
    method = isinstance(test, types.MethodType)
    function: Any = test.__func__ if isinstance(test, types.MethodType) else test
    name = str(getattr(function, "__name__", "test"))
    real = wrapped(function)
    if not isinstance(real, types.FunctionType):
        raise TypeError(f"{name} is a callable that runs no function: no runner collects it as a test")
    if real.__code__.co_flags & _NOT_RUNNABLE or getattr(function, "__code__", real.__code__).co_flags & _NOT_RUNNABLE:
        raise TypeError(f"{name} is a generator or a coroutine: no runner here can run it")
    wanted = requested(function, method)
    inner = real.__code__  # a decorator's wrapper takes what the function it wraps takes
    accepted = set(inner.co_varnames[: inner.co_argcount + inner.co_kwonlyargcount])
    own = pytest_marks.marks_of(getattr(test, "pytestmark", None))
    marks = [*own, *marks]  # the closest first, as pytest reads them: the test's, its class's, outer, the module's
    if pytest_marks.skipped(marks):
        return
    for arguments, case_marks in pytest_marks.cases(marks):
        expected = pytest_marks.xfail([*own, *case_marks, *marks[len(own) :]])  # a param's right after the test's
        if expected is not None and not expected.run:
            continue  # xfail(run=False): pytest reports it xfailed, unrun
        for picks in fixtures.cases(wanted, list(arguments), marks):
            with contextlib.ExitStack() as made:
                made.enter_context(pytest_marks.warning_filters([*own, *case_marks, *marks[len(own) :]]))
                try:
                    given = fixtures.arguments(wanted, arguments, marks, picks, made, instance)
                    given.update((n, v) for n, v in arguments.items() if n in accepted)
                    result = test(**given)
                    if isinstance(result, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
                        # It ran nothing (a decorator's wrapper of a generator or a coroutine made it).
                        if not isinstance(result, types.AsyncGeneratorType):
                            result.close()
                        raise TypeError(f"{name} gave a generator or a coroutine: nothing of it ran")
                except SystemExit as exc:  # no end of the tests in a test of theirs: pytest fails it, or its xfail
                    if expected is None or not expected.catches(exc):
                        raise RuntimeError(f"{name} exited ({exc.code!r}): a test that exits did not pass") from None
                except pytest_marks.pytest_class("Skipped"):  # pytest.skip() in the test or a fixture
                    pytest_marks.no_pass("skipped itself")
                    continue
                except pytest_marks.pytest_class("XFailed"):  # pytest.xfail() in the test: xfailed, as pytest
                    pytest_marks.no_pass("expected itself to fail")
                    continue
                except Exception as exc:
                    if expected is None or not expected.catches(exc):  # an xfail test that fails as it says passes
                        raise
                else:
                    if expected is not None and expected.strict:
                        raise AssertionError(f"{name} passed, and its xfail(strict=True) says it must not")
