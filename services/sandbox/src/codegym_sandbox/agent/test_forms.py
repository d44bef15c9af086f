"""The forms assert tests come in besides plain statements, run as their own runners would: pytest's
test functions and unittest's cases, in the scope ``python main.py`` gives them (Python's ``__main__``).

Test code that only defines ``def test_add(): assert ...`` runs nothing by itself: judged as plain statements,
any program passed it. Test code that ends in ``unittest.main()`` loads its cases from ``sys.modules["__main__"]``
and ends with ``SystemExit``: judged in a scope of its own, it found no case and every program failed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Iterator, Sequence
from types import MappingProxyType
from typing import Any, TypeGuard

from . import program_names
from .fixture_requests import Builtin, Fixtures, innermost, requested
from .program_errors import program_traceback

_TESTS_FILE = "<tests>"  # the name the checker compiles the tests under (assert_runner.read_tests)
# A code object's flags of a generator, a coroutine and an async generator (``inspect``'s, which the agent does
# not import: every program is forked from it).
_NOT_RUNNABLE = 0x20 | 0x80 | 0x200


RAN = "__codegym_ran__"  # in the tests' scope: what records each test function of theirs that ran (see compiled)
_COLLECTED = ("test", "check")


def compiled(text: str) -> types.CodeType:
    """The tests' code. Where it defines test functions (``def test_*``, ``def check``) outside functions and
    classes, each records its name when called (:data:`RAN`), first thing: collection then runs those the code
    never ran itself, whether it named them or not (a list of them, never called, ran nothing before)."""
    if not any(f"def {prefix}" in text for prefix in _COLLECTED):
        return compile(text, _TESTS_FILE, "exec", dont_inherit=True)
    import ast  # only in the checker, never in the agent that programs are forked from

    try:
        tree = ast.parse(text, _TESTS_FILE)
    except BaseException:
        return compile(text, _TESTS_FILE, "exec", dont_inherit=True)  # its own error, as Python shows it
    for node in _top_level_functions(tree.body):
        first = node.body[0]
        docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        record = ast.Expr(ast.Call(ast.Name(RAN, ast.Load()), [ast.Constant(node.name)], []))
        node.body.insert(1 if docstring and isinstance(first.value.value, str) else 0, ast.copy_location(record, first))
    return compile(ast.fix_missing_locations(tree), _TESTS_FILE, "exec", dont_inherit=True)


def _top_level_functions(body: list[Any]) -> Iterator[Any]:
    """The functions named as runners collect them that ``body`` defines, in its blocks too (``if``, ``try``,
    ``with``, loops), never in a function or a class."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith(_COLLECTED):
                yield node
        elif not isinstance(node, ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _top_level_functions(getattr(node, field, None) or [])


@contextlib.contextmanager
def as_main(module: types.ModuleType) -> Iterator[None]:
    """The tests' module as Python's ``__main__``, with the arguments ``python main.py`` has, while they run."""
    saved, argv = sys.modules.get("__main__"), sys.argv
    sys.modules["__main__"], sys.argv = module, ["main.py"]
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
        sys.argv = argv


def ended_well(exc: SystemExit) -> bool:
    """Whether the tests' own ``sys.exit`` (unittest's ``main`` ends with one) says they passed: as Python's
    exit status would, 0 only for ``None`` or an int 0 (``sys.exit(0.0)`` prints and exits 1)."""
    return exc.code is None or (type(exc.code) in (int, bool) and exc.code == 0)


def outcome_of(exc: BaseException) -> str:
    """``failed`` for an assertion of the tests' that failed (pytest's ``fail``, ``pytest.raises`` that saw no
    error: ``Failed``); ``error`` for any other exception, the program's own among them (an ``AssertionError``
    of the program's too)."""
    if program_traceback(exc) is not None:
        return "error"
    outcomes = sys.modules.get("_pytest.outcomes")  # imported by tests that use pytest, never by the program
    failed = getattr(outcomes, "Failed", AssertionError)
    return "failed" if isinstance(exc, (AssertionError, failed)) else "error"


def run_collected(
    code: types.CodeType,
    scope: dict[str, object],
    declared: frozenset[str],
    exited: bool,
    ran: set[str],
    builtin: Builtin = MappingProxyType({}),
) -> None:
    """Run what a test runner would collect from the tests' scope once their code ran, and their code did not run
    itself (``exited``: it ended in an exit that says it passed, which ``unittest.main()`` makes once it ran its
    cases). An assertion of theirs that fails raises, as it would have in the code; a test that cannot be run here
    (it needs a fixture of pytest's but ``fixtures``, or is a generator or a coroutine) is the tests' error, never a
    pass; a test with ``pytest.mark.parametrize`` marks (its own, its class's, the module's) runs once per case.
    A test function the code ran itself (it records so: :func:`compiled`) is not run again, as a script runs it
    once: run again, a test that counts on state its first run left fails; one the code only names is run.

    - HumanEval's ``check`` that the code never calls: called with the task's declared entry point, as HumanEval's
      harness does.
    - pytest's ``test*`` functions the code never ran (where it defines them in a function of its own, never
      named).
    - pytest's ``Test*`` classes the code never names (no ``unittest.TestCase``, no ``__init__`` of their own or
      inherited): each ``test*`` method (inherited too) on a new instance, between ``setup_method`` and
      ``teardown_method``, all of them between the class's ``setup_class`` and ``teardown_class``.
    - unittest's cases, unless ``unittest.main()`` ran them (again, where it ran them with ``exit=False``, which
      fails nothing: a runner's own report is no verdict).
    """
    named = program_names.loaded_names(code)
    check = scope.get("check")
    if _theirs(check) and not _ran_by_the_code("check", check, named, ran) and len(declared) == 1:
        (entry,) = declared
        if entry in scope:
            check(scope[entry])
    unittest = sys.modules.get("unittest")
    fixtures = Fixtures.of(scope, builtin)
    try:
        for name, value in list(scope.items()):
            if not name.startswith(("test", "Test")):
                continue
            if _collected(value):
                if not _ran_by_the_code(name, value, named, ran):
                    _run(value, _marks(scope.get("pytestmark")), fixtures)
            elif isinstance(value, type) and _pytest_class(value, unittest) and name not in named:
                with fixtures.of_class(value) as of_class:
                    _run_class(value, _marks(scope.get("pytestmark")), of_class)
    finally:
        fixtures.close()
    if unittest is None or exited:
        return
    cases = [
        value
        for value in scope.values()
        if isinstance(value, type) and issubclass(value, unittest.TestCase) and value.__module__ == "__main__"
    ]
    if not cases:
        return
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case) for case in cases)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1).run(suite)
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} of the tests' cases raised an error")
    if not result.wasSuccessful():  # a failure, or an expected failure that passed
        raise AssertionError("the tests' cases failed")


def _ran_by_the_code(name: str, test: types.FunctionType, named: set[str], ran: set[str]) -> bool:
    """Whether the tests' code ran the test it bound to ``name`` itself: it recorded so (:func:`compiled`; a
    decorator's wrapper runs the function it wraps, which records the name it was defined by), or, where it
    records nothing (defined in a function of theirs, or wrapped by a wrapper that does not say what it wraps),
    the code names it."""
    return name in ran or (RAN not in wrapped(test).__code__.co_names and name in named)


_AGENT = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the checker's own code: stand-ins, fixtures


def _collected(value: object) -> TypeGuard[types.FunctionType]:
    """Whether pytest collects ``value``, bound to a ``test*`` name: any function, the tests' own and a library
    decorator's wrapper of one (``mock.patch``'s: left out, a test so decorated passed any program), but the
    checker's own (a stand-in for a function of the program's)."""
    return isinstance(value, types.FunctionType) and not value.__code__.co_filename.startswith(_AGENT)


def wrapped(function: types.FunctionType) -> types.FunctionType:
    """The function that decorators' wrappers of ``function`` wrap (``functools.wraps`` says which), the tests'
    own where one is: ``function`` itself where none says."""
    found = function
    for _ in range(32):
        inner = vars(found).get("__wrapped__")
        if not isinstance(inner, types.FunctionType):
            break
        found = inner
        if _theirs(found):
            break
    return found


def _marks(value: object) -> list[object]:
    """pytest's marks set as a test's, a module's or a class's ``pytestmark``: one mark, or a list of them; only
    pytest's own ``Mark`` objects (a program's object of that name is no mark: it would choose what runs)."""
    kind = getattr(sys.modules.get("_pytest.mark.structures"), "Mark", None)
    values = list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]
    return [mark for mark in values if kind is not None and type(mark) is kind]


class _Absent(BaseException):
    """Stands for a class of pytest's where the tests did not import pytest: never raised, never made."""


def _pytest(name: str) -> Any:
    """pytest's own class ``name`` (``ParameterSet``, ``Skipped``), where the tests imported pytest; else a class
    that nothing is an instance of."""
    for module in ("_pytest.mark.structures", "_pytest.outcomes"):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type):
            return found
    return _Absent


def _skipped(marks: Sequence[object]) -> bool:
    """Whether pytest would skip a test with these marks: ``skip``, or ``skipif`` whose condition holds (one
    written as a string is run: only pytest can evaluate it)."""
    for mark in marks:
        name, args, kwargs = getattr(mark, "name", ""), getattr(mark, "args", ()), getattr(mark, "kwargs", {})
        condition = args[0] if args else kwargs.get("condition", False)
        if name == "skip" or (name == "skipif" and not isinstance(condition, str) and bool(condition)):
            return True
    return False


@contextlib.contextmanager
def no_pytest_main(code: types.CodeType) -> Iterator[None]:
    """``pytest.main()`` in the tests (``if __name__ == "__main__": pytest.main([__file__])``) answers 0 and runs
    nothing: collection here runs their tests. pytest itself would read a ``conftest.py`` from the directory the
    program writes to, and run it in the checker."""
    pytest: Any = None
    if "pytest" in program_names.used_names(code):
        # None here: the tests' own import of it fails as it would in Python, if they make one.
        with contextlib.suppress(ImportError):
            pytest = importlib.import_module("pytest")
    if pytest is None:
        yield
        return
    main = pytest.main
    pytest.main = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        pytest.main = main


def _run_class(cls: type, marks: list[object], fixtures: Fixtures) -> None:
    """A pytest class's tests, as pytest runs them."""
    methods = [m for m in dir(cls) if m.startswith("test") and callable(getattr(cls, m))]
    if hasattr(cls, "setup_class"):
        cls.setup_class()
    try:
        for method in methods:
            instance = cls()
            test = getattr(instance, method)
            for hook in ("setup_method", None, "teardown_method"):
                if hook is None:
                    _run(test, [*marks, *_marks(getattr(cls, "pytestmark", None))], fixtures, instance)
                elif hasattr(instance, hook):  # pytest passes the test to a hook that takes it
                    step = getattr(instance, hook)
                    step(test) if step.__code__.co_argcount > 1 else step()
    finally:
        if hasattr(cls, "teardown_class"):
            cls.teardown_class()


def _theirs(value: object) -> TypeGuard[types.FunctionType]:
    """Whether ``value`` is a function the tests defined (never one of the program's, which are stand-ins)."""
    return isinstance(value, types.FunctionType) and value.__code__.co_filename == _TESTS_FILE


def _pytest_class(value: type, unittest: types.ModuleType | None) -> bool:
    """A class of the tests' that pytest collects: none with an ``__init__`` (its own or a base's but object's)."""
    if value.__module__ != "__main__" or value.__init__ is not object.__init__:  # type: ignore[misc]
        return False
    return unittest is None or not issubclass(value, unittest.TestCase)


def _run(
    test: types.FunctionType | types.MethodType,
    marks: Sequence[object],
    fixtures: Fixtures,
    instance: object = None,
) -> None:
    """``test`` run as pytest runs it: once, or once per case of its ``pytest.mark.parametrize`` marks (and its
    class's, ``marks``) and per param of the parametrized fixtures it takes; each argument no mark gives is a
    fixture (``fixtures``: made for that run, ended after it, or kept for its scope); one that none gives is the
    tests' ``TypeError``."""
    code = test.__code__
    if code.co_flags & _NOT_RUNNABLE:
        raise TypeError(f"{test.__name__} is a generator or a coroutine: no runner here can run it")
    method = isinstance(test, types.MethodType)
    function: Any = test.__func__ if isinstance(test, types.MethodType) else test
    wanted = requested(function, method)
    inner = innermost(function).__code__  # a decorator's wrapper takes what the function it wraps takes
    accepted = set(inner.co_varnames[: inner.co_argcount + inner.co_kwonlyargcount])
    marks = [*_marks(getattr(test, "pytestmark", None)), *marks]
    if _skipped(marks):
        return
    for arguments, case_marks in _cases(marks):
        expected_failure = any(getattr(m, "name", "") == "xfail" for m in (*marks, *case_marks))
        for picks in fixtures.cases(wanted, list(arguments), marks):
            with contextlib.ExitStack() as made:
                try:
                    given = fixtures.arguments(wanted, arguments, marks, picks, made, instance)
                    given.update((n, v) for n, v in arguments.items() if n in accepted)
                    result = test(**given)
                    if isinstance(result, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
                        # It ran nothing (a decorator's wrapper of a generator or a coroutine made it).
                        if not isinstance(result, types.AsyncGeneratorType):
                            result.close()
                        raise TypeError(f"{test.__name__} gave a generator or a coroutine: nothing of it ran")
                except _pytest("Skipped"):  # pytest.skip() in the test or a fixture
                    continue
                except Exception:
                    if not expected_failure:  # an xfail test that fails passes, as pytest counts it
                        raise


def _cases(marks: Sequence[object]) -> list[tuple[dict[str, object], list[object]]]:
    """The arguments of each case the ``parametrize`` marks among ``marks`` make (every combination of theirs),
    each with the marks of its ``pytest.param``s; none that pytest would skip."""
    cases: list[tuple[dict[str, object], list[object]]] = [({}, [])]
    for mark in marks:
        if getattr(mark, "name", None) != "parametrize":
            continue
        args, kwargs = getattr(mark, "args", ()), getattr(mark, "kwargs", {})
        names, values = (*args, *(kwargs.get(k) for k in ("argnames", "argvalues")[len(args) :]))[:2]
        if kwargs.get("indirect"):
            raise TypeError("parametrize(indirect=...) needs pytest's fixtures: no runner here can run it")
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        rows = []
        for value in values:
            own: list[object] = []
            if type(value) is _pytest("ParameterSet"):  # pytest.param(..., marks=...)
                own = _marks(list(getattr(value, "marks", ())))
                if _skipped(own):
                    continue
                value = value.values
            elif len(names) == 1:
                value = (value,)
            rows.append((dict(zip(names, value, strict=True)), own))
        cases = [({**case, **row}, [*was, *own]) for case, was in cases for row, own in rows]
    return cases
