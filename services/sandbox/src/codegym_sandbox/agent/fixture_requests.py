"""What a pytest test function asks for by its arguments, made as pytest makes it: the tests' own fixtures
(``@pytest.fixture`` in their module or their test class, with the fixtures they ask for in turn, ``yield``
fixtures ended after their test, ``autouse``, ``params``, the scopes), and pytest's own that the checker makes
(``pytest_fixtures``).

A fixture is only ever a function of the tests' own code, marked by pytest's own decorator: nothing the program
answers is one (its values are stand-ins and copies), so no program decides what a test is given.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, TypeGuard

from . import pytest_marks
from .program_handle import Handle

TESTS_FILE = "<tests>"  # the name the checker compiles the tests under (test_forms.read_tests)
_NOT_RUNNABLE = 0x80 | 0x200  # a coroutine's and an async generator's code flags: no runner here awaits them
_GENERATOR = 0x20
_WIDER = ("class", "module", "package", "session")  # scopes made once for more than one test
_ALL = ("function", *_WIDER)

Builtin = Mapping[str, Callable[[], AbstractContextManager[object]]]  # pytest's fixtures made here, by name


class Definition(NamedTuple):
    """One fixture of the tests': its function (a method of a test class's, unbound), what pytest's decorator
    said of it; a method's ``holder``, an instance of the class it was found in, made once for the class's tests.
    As pytest binds a method fixture: to the test's own instance where the fixture is of a test's scope and that
    instance is one of the holder's class, else to the holder (an outer class's fixture, run for a nested class's
    test, is never bound to the nested class's instance; one of the class's scope is never a test's)."""

    name: str
    function: Any  # a types.FunctionType of the tests' (typed so, mypy would read it as a method)
    scope: str
    params: tuple[object, ...] | None
    autouse: bool
    holder: object = None

    @property
    def method(self) -> bool:
        return self.holder is not None


def definition(value: object) -> Definition | None:
    """``value`` as a fixture of the tests': pytest's own mark on a function of their code, else None."""
    fixtures = sys.modules.get("_pytest.fixtures")  # imported by tests that use pytest's decorator, and only then
    if fixtures is None:
        return None
    wrapper = getattr(fixtures, "FixtureFunctionDefinition", None)  # pytest 8.4 on
    if wrapper is not None and type(value) is wrapper:
        function, marker = vars(value).get("_fixture_function"), vars(value).get("_fixture_function_marker")
    elif isinstance(value, types.FunctionType):  # pytest before 8.4 marks a wrapper of the function
        marker = vars(value).get("_pytestfixturefunction")
        wrapped = vars(value).get("__pytest_wrapped__")
        kind = getattr(sys.modules.get("_pytest.compat"), "_PytestWrapper", None)
        function = getattr(wrapped, "obj", None) if kind is not None and type(wrapped) is kind else value
    else:
        return None
    if marker is None or type(marker) is not getattr(fixtures, "FixtureFunctionMarker", None) or not theirs(function):
        return None
    params = marker.params
    return Definition(
        name=marker.name or function.__name__,
        function=function,
        scope=pytest_marks.fixture_scope(marker, marker.name or function.__name__),
        params=tuple(params) if params is not None else None,
        autouse=bool(marker.autouse),
    )


def theirs(value: object) -> TypeGuard[types.FunctionType]:
    """Whether ``value`` is a function the tests defined (never one of the program's, which are stand-ins)."""
    return isinstance(value, types.FunctionType) and value.__code__.co_filename == TESTS_FILE


@contextlib.contextmanager
def setup_error(what: str) -> Iterator[None]:
    """An assertion that fails in ``what`` (a fixture, a module's or a test's hook), or ``pytest.fail()`` there, as
    pytest takes it: the error of the tests it runs around, never their failure (``pytest.xfail()`` is no error)."""
    try:
        yield
    except pytest_marks.pytest_class("XFailed"):
        raise
    except (AssertionError, pytest_marks.pytest_class("Failed")) as exc:
        raise pytest_marks.SetupFailed(f"{what} failed: pytest errors the tests it runs around") from exc


def requested(function: Any, skip_self: bool) -> list[str]:
    """The names a function asks for as pytest reads them: its arguments without a default (a method's first
    skipped); of a decorator's wrapper, those of the function it wraps, less those ``mock.patch`` gives."""
    return _arguments(wrapped(function), skip_self)[_patched(function) :]


def wrapped(value: Any) -> Any:
    """The function that decorators' wrappers of ``value`` wrap (``functools.wraps`` and ``update_wrapper`` say
    which), the tests' own where one is: ``value`` itself where none says."""
    found = value
    for _ in range(32):
        inner = getattr(found, "__dict__", {}).get("__wrapped__")
        if not callable(inner) or isinstance(inner, Handle):
            break
        found = inner
        if theirs(found):
            break
    return found


def _patched(function: Any) -> int:
    """How many arguments ``mock.patch`` decorators give ``function`` (a mock each: those of ``new=DEFAULT``), as
    pytest counts them."""
    patchings = getattr(function, "__dict__", {}).get("patchings")
    mock = sys.modules.get("unittest.mock")
    if type(patchings) is not list or mock is None:
        return 0
    default = getattr(mock, "DEFAULT", None)
    return sum(1 for p in patchings if not getattr(p, "attribute_name", None) and getattr(p, "new", None) is default)


def _arguments(function: types.FunctionType, skip_self: bool) -> list[str]:
    code = function.__code__
    positional = list(code.co_varnames[: code.co_argcount])
    if skip_self:
        positional = positional[1:]
    defaults = len(function.__defaults__ or ())
    if defaults:
        positional = positional[: len(positional) - defaults]
    keyword = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    given = function.__kwdefaults__ or {}
    return [*positional, *(name for name in keyword if name not in given)]


class Request:
    """What a test or a fixture gets for ``request``: its ``param`` (a parametrized fixture's), ``addfinalizer``,
    ``getfixturevalue`` (a fixture by its name, made as if asked for)."""

    def __init__(
        self,
        stack: contextlib.ExitStack,
        lookup: Callable[[str], object],
        param: object = None,
        has_param: bool = False,
    ) -> None:
        self._stack, self._lookup = stack, lookup
        if has_param:
            self.param = param

    def addfinalizer(self, finalizer: Callable[[], object]) -> None:
        self._stack.callback(finalizer)

    def getfixturevalue(self, name: str) -> object:
        return self._lookup(str(name))


class Made:
    """Fixtures of a scope wider than a test's, made once for it: their values, and the stack that ends them."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.stack = contextlib.ExitStack()


class Fixtures:
    """The fixtures of one run's tests, and those of a wider scope made so far: the module's (ended by
    :meth:`close`), and while a test class runs, the class's (ended with it)."""

    def __init__(
        self,
        defined: dict[str, Definition],
        builtin: Builtin,
        module: Made | None = None,
        test_class: Made | None = None,
    ) -> None:
        self.defined, self.builtin = defined, builtin
        self.module = module if module is not None else Made()
        self.test_class = test_class

    @classmethod
    def of(cls, scope: Mapping[str, object], builtin: Builtin) -> Fixtures:
        defined = {}
        for value in list(scope.values()):
            found = definition(value)
            if found is not None:
                defined[found.name] = found
        return cls(defined, builtin)

    @contextlib.contextmanager
    def of_class(self, test_class: type) -> Iterator[Fixtures]:
        """The fixtures a test class's methods see: the module's and the class's own (a base's too, the nearest
        first); those of the class's scope, and the class's own of any wider one, made once for its tests."""
        defined = dict(self.defined)
        own = [
            found
            for base in reversed(test_class.__mro__)
            for v in list(vars(base).values())
            if (found := definition(v))
        ]
        if own:
            # As pytest's collection makes one, to bind the class's fixtures to (a unittest case's for "runTest").
            case = getattr(sys.modules.get("unittest"), "TestCase", None)
            holder = test_class("runTest") if case is not None and issubclass(test_class, case) else test_class()
            defined.update((found.name, found._replace(holder=holder)) for found in own)
        inner = Fixtures(defined, self.builtin, self.module, Made())
        try:
            yield inner
        finally:
            inner.test_class.stack.close()  # type: ignore[union-attr]

    def close(self) -> None:
        self.module.stack.close()

    def cases(self, wanted: Sequence[str], given: Sequence[str], marks: Sequence[object]) -> list[dict[str, int]]:
        """Which of each parametrized fixture's ``params`` each run of a test takes: every combination, as pytest
        runs it (none: one run)."""
        chosen: list[tuple[str, int]] = []
        for name in self._closure(wanted, given, marks):
            found = self.defined.get(name)
            if found is not None and found.params is not None:
                chosen.append((name, len(found.params)))
        return [
            dict(zip((n for n, _ in chosen), picks, strict=True))
            for picks in itertools.product(*(range(count) for _, count in chosen))
        ]

    def arguments(
        self,
        wanted: Sequence[str],
        given: Mapping[str, object],
        marks: Sequence[object],
        picks: Mapping[str, int],
        made: contextlib.ExitStack,
        instance: object,
    ) -> dict[str, object]:
        """The values of ``wanted`` that ``given`` (a ``parametrize`` case) does not give, each fixture made once
        for this run (autouse ones and ``usefixtures`` too, first), ended by ``made`` or with its scope."""
        values: dict[str, object] = dict(given)
        # As pytest orders them: those of a wider scope first, then autouse ones, then in the order asked.
        first = [*self._autouse(), *_used(marks), *wanted]
        for name in sorted(first, key=self._rank):
            self._make(name, values, picks, made, instance, ())
        return {name: values[name] for name in wanted}

    def used(
        self, marks: Sequence[object], made: contextlib.ExitStack, instance: object, scopes: tuple[str, ...] = _ALL
    ) -> None:
        """Make the fixtures of ``scopes`` a test that asks for none by its arguments uses (a unittest case's: autouse
        ones, ``usefixtures``'), for ``instance``. A parametrized one is the tests' error, as pytest's."""
        self._make_used(marks, made, instance, scopes)

    def before_class(self, marks: Sequence[object]) -> None:
        """Make those of :meth:`used` wider than a class's, as pytest makes them before a case's ``setUpClass``."""
        kept = self.test_class if self.test_class is not None else self.module
        self._make_used(marks, kept.stack, None, ("module", "package", "session"))

    def close_class(self) -> None:
        """End the fixtures made for the test class's scope (a unittest case's, before its ``tearDownClass``)."""
        if self.test_class is not None:
            self.test_class.stack.close()

    def _make_used(
        self, marks: Sequence[object], made: contextlib.ExitStack, instance: object, scopes: tuple[str, ...]
    ) -> None:
        if self.cases([], [], marks) != [{}]:
            raise TypeError("a parametrized fixture around a unittest case: pytest gives it none of its params")
        values: dict[str, object] = {}
        for name in sorted([*self._autouse(), *_used(marks)], key=self._rank):
            if self._scope(name) in scopes:
                self._make(name, values, {}, made, instance, ())

    def _scope(self, name: str) -> str:
        found = self.defined.get(name)
        return found.scope if found is not None and found.params is None else "function"

    def _rank(self, name: str) -> int:
        scope = self._scope(name)
        return -_WIDER.index(scope) - 1 if scope in _WIDER else 0

    def _autouse(self) -> list[str]:
        return [name for name, found in self.defined.items() if found.autouse]

    def _closure(self, wanted: Sequence[str], given: Sequence[str], marks: Sequence[object]) -> list[str]:
        seen: list[str] = []
        todo = [*self._autouse(), *_used(marks), *wanted]
        while todo:
            name = todo.pop()
            if name in seen or name in given:
                continue
            seen.append(name)
            found = self.defined.get(name)
            if found is not None:
                todo.extend(requested(found.function, found.method))
        return seen

    def _make(
        self,
        name: str,
        values: dict[str, object],
        picks: Mapping[str, int],
        made: contextlib.ExitStack,
        instance: object,
        chain: tuple[str, ...],
    ) -> None:
        if name in values:
            return
        if name in chain:
            raise TypeError(f"fixtures ask for each other: {' -> '.join((*chain, name))}")
        found = self.defined.get(name)
        if found is None:
            if name in self.builtin:
                values[name] = made.enter_context(self.builtin[name]())
            elif name == "request":
                values[name] = Request(made, self._lookup(values, picks, made, instance, chain))
            else:
                raise TypeError(f"fixture {name!r} not found: no fixture of the tests' nor of pytest's made here")
            return
        kept = self._kept(found)
        if kept is not None and name in kept.values:
            values[name] = kept.values[name]
            return
        stack = kept.stack if kept is not None else made
        inner: dict[str, object] = {}
        for asked in requested(found.function, found.method):
            if asked == "request":
                has = found.params is not None
                param = found.params[picks[name]] if has else None  # type: ignore[index]
                inner[asked] = Request(stack, self._lookup(values, picks, made, instance, (*chain, name)), param, has)
            else:
                self._make(asked, values, picks, made, instance, (*chain, name))
                inner[asked] = values[asked]
        values[name] = _value(found, inner, stack, instance)
        if kept is not None:
            kept.values[name] = values[name]

    def _lookup(
        self,
        values: dict[str, object],
        picks: Mapping[str, int],
        made: contextlib.ExitStack,
        instance: object,
        chain: tuple[str, ...],
    ) -> Callable[[str], object]:
        def lookup(name: str) -> object:
            self._make(name, values, picks, made, instance, chain)
            return values[name]

        return lookup

    def _kept(self, found: Definition) -> Made | None:
        """Where a fixture made for more than one test is kept: a class's own, or one of the class's scope, with
        the class (a test outside classes makes the latter for itself); any other of a wider scope with the
        module. None for a test's own (a parametrized fixture is made for each test that takes a param)."""
        if found.scope not in _WIDER or found.params is not None:
            return None
        if found.method or found.scope == "class":
            return self.test_class
        return self.module


def _used(marks: Sequence[object]) -> list[str]:
    """The fixtures ``pytest.mark.usefixtures`` marks name."""
    names: list[str] = []
    for mark in marks:
        if getattr(mark, "name", None) == "usefixtures":
            names.extend(str(n) for n in getattr(mark, "args", ()))
    return names


def _value(found: Definition, arguments: dict[str, object], stack: contextlib.ExitStack, instance: object) -> Any:
    """What the fixture's function gives: its return, or its ``yield``, whose rest runs when ``stack`` ends. An
    assertion that fails in either is the error of the tests it runs around (:func:`setup_error`)."""
    function: Callable[..., Any] = found.function
    if found.method:
        own = found.scope == "function" and isinstance(instance, type(found.holder))
        function = types.MethodType(found.function, instance if own else found.holder)
    flags = found.function.__code__.co_flags
    if flags & _NOT_RUNNABLE:
        raise TypeError(f"fixture {found.name!r} is a coroutine: no runner here awaits it")
    if not flags & _GENERATOR:
        with setup_error(f"fixture {found.name!r}"):
            return function(**arguments)
    steps = function(**arguments)
    with setup_error(f"fixture {found.name!r}"):
        value = next(steps)

    def finish() -> None:
        try:
            with setup_error(f"fixture {found.name!r}'s teardown"):
                next(steps)
        except StopIteration:
            return
        raise TypeError(f"fixture {found.name!r} yields more than once")

    stack.callback(finish)
    return value
