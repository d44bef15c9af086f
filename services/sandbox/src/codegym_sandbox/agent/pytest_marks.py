"""pytest's marks as the checker's runner reads them (``test_forms``): which tests pytest skips, which it expects to
fail and how (``xfail``), and the cases ``parametrize`` makes. Only pytest's own mark objects count: a program's
object of a mark's name would otherwise choose what runs.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple


def marks_of(value: object) -> list[object]:
    """pytest's marks set as a test's, a module's or a class's ``pytestmark``, or given to a ``pytest.param``: one
    mark or a list of them, each pytest's own ``Mark`` or ``MarkDecorator`` (``pytest.mark.xfail``)."""
    structures = sys.modules.get("_pytest.mark.structures")
    mark, decorator = getattr(structures, "Mark", None), getattr(structures, "MarkDecorator", None)
    values = list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]
    found = []
    for item in values:
        if decorator is not None and type(item) is decorator:
            item = vars(item).get("mark")
        if mark is not None and type(item) is mark:
            found.append(item)
    return found


def of_class(cls: type) -> list[object]:
    """pytest's marks of a test class: its own ``pytestmark`` and its bases' (pytest reads a class's through its
    MRO, the bases' first; a decorated class's attribute holds its own only)."""
    return [mark for c in reversed(cls.__mro__) for mark in marks_of(vars(c).get("pytestmark"))]


class _Absent(BaseException):
    """Stands for a class of pytest's where the tests did not import pytest: never raised, never made."""


def pytest_class(name: str) -> Any:
    """pytest's own class ``name`` (``ParameterSet``, ``Skipped``, ``XFailed``, ``Failed``), where the tests imported
    pytest; else a class that nothing is an instance of."""
    for module in ("_pytest.mark.structures", "_pytest.outcomes"):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type):
            return found
    return _Absent


def _parts(mark: object) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return getattr(mark, "name", ""), getattr(mark, "args", ()), getattr(mark, "kwargs", {})


def _holds(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``skipif``'s or an ``xfail``'s conditions hold: none given, or any of them true (one written as a
    string does not: only pytest can evaluate it, and a test run is the stricter reading)."""
    conditions = list(args) if args else [kwargs["condition"]] if "condition" in kwargs else []
    return not conditions or any(not isinstance(c, str) and bool(c) for c in conditions)


# A ``pytest`` file's tests are judged (``strict``): every test of it runs and passes, none skipped, none expected to
# fail, none of no case. A completion is the file's first part, and its last line can skip every test of the file
# (``pytestmark = pytest.mark.skip``, a ``setup_module`` that skips, a mark or an empty ``parametrize`` on the first
# test), and a wrong program passed, as under pytest (round 62).
_STRICT: list[bool] = [False]


@contextlib.contextmanager
def strict(on: bool) -> Iterator[None]:
    """Marks read as a ``pytest`` file's (see ``_STRICT``) while it runs, where ``on``."""
    _STRICT.append(on)
    try:
        yield
    finally:
        _STRICT.pop()


def no_pass(what: str) -> None:
    """Raise where a ``pytest`` file's test would pass without running: ``what`` says how."""
    if _STRICT[-1]:
        raise AssertionError(f"a test of the file {what}: in a pytest file every test runs and passes")


def skipped(marks: Sequence[object]) -> bool:
    """Whether pytest would skip a test with these marks: ``skip``, or ``skipif`` whose condition holds."""
    for mark in marks:
        name, args, kwargs = _parts(mark)
        if name == "skip" or (name == "skipif" and (args or "condition" in kwargs) and _holds(args, kwargs)):
            no_pass("is skipped")
            return True
    return False


class SetupFailed(RuntimeError):
    """An assertion that failed around a test (in a fixture or a hook): the test's error, as pytest takes it; an
    ``xfail`` mark's ``raises`` is matched against the assertion it wraps, never against this."""


class Expected(NamedTuple):
    """A test's ``xfail`` mark whose condition holds: pytest passes it where it fails as the mark says (of one of
    ``raises``' types, where given), fails it where it passes under ``strict``, and does not run it without ``run``."""

    raises: tuple[type, ...] | None
    strict: bool
    run: bool

    def catches(self, exc: BaseException) -> bool:
        if isinstance(exc, SetupFailed) and exc.__cause__ is not None:
            exc = exc.__cause__
        return self.raises is None or isinstance(exc, self.raises)


def xfail(marks: Sequence[object]) -> Expected | None:
    """The first ``xfail`` mark among ``marks`` whose condition holds, as pytest reads it; None where none does."""
    for mark in marks:
        name, args, kwargs = _parts(mark)
        if name != "xfail" or not _holds(args, kwargs):
            continue
        raises = kwargs.get("raises")
        kinds = raises if isinstance(raises, tuple) else (raises,) if raises is not None else None
        if kinds is not None and not all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds):
            raise TypeError(f"xfail(raises={raises!r}) names no exception type")
        no_pass("is expected to fail")
        return Expected(kinds, bool(kwargs.get("strict", False)), bool(kwargs.get("run", True)))
    return None


def cases(marks: Sequence[object]) -> list[tuple[dict[str, object], list[object]]]:
    """The arguments of each case the ``parametrize`` marks among ``marks`` make (every combination of theirs),
    each with the marks of its ``pytest.param``s; none that pytest would skip."""
    made: list[tuple[dict[str, object], list[object]]] = [({}, [])]
    given: set[object] = set()
    for mark in marks:
        if getattr(mark, "name", None) != "parametrize":
            continue
        args, kwargs = getattr(mark, "args", ()), getattr(mark, "kwargs", {})
        names, values = (*args, *(kwargs.get(k) for k in ("argnames", "argvalues")[len(args) :]))[:2]
        if kwargs.get("indirect"):
            raise TypeError("parametrize(indirect=...) needs pytest's fixtures: no runner here can run it")
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        # As pytest refuses: merged, a completion's mark on the first test gave a dataset's case the values it
        # chose, its expected result among them (round 63).
        if twice := [n for n in names if n in given or names.count(n) > 1]:
            raise ValueError(f"duplicate parametrization of {twice[0]!r}")
        given.update(names)
        rows = []
        for value in values:
            own: list[object] = []
            if type(value) is pytest_class("ParameterSet"):  # pytest.param(..., marks=...)
                own = marks_of(list(getattr(value, "marks", ())))
                if skipped(own):
                    continue
                value = value.values
            elif len(names) == 1:
                value = (value,)
            rows.append((dict(zip(names, value, strict=True)), own))
        made = [({**case, **row}, [*was, *own]) for case, was in made for row, own in rows]
    if not made:
        no_pass("has no case to run")
    return made


_SCOPES = ("function", "class", "module", "package", "session")


def fixture_scope(marker: Any, name: str) -> str:
    """The scope of the fixture ``name`` that ``pytest.fixture`` marked with ``marker``: its own, or what its scope
    callable answers (``scope=f``, called as pytest calls it, with no command-line options to read: a callable that
    reads them is the tests' error). Taken for a test's scope, a module's list of results was new for each test,
    and a test that checks the others' results passed any program."""
    scope = marker.scope if isinstance(marker.scope, str) else marker.scope(fixture_name=name, config=None)
    if scope not in _SCOPES:
        raise ValueError(f"fixture {name!r}: {scope!r} is no scope of pytest's")
    return str(scope)


@contextlib.contextmanager
def warning_filters(marks: Sequence[object]) -> Iterator[None]:
    """The warning filters of the ``filterwarnings`` marks among ``marks`` (the closest first), in force within, as
    pytest applies them around a test, its fixtures too: the program's warnings are issued again under the tests'
    filters, and one that a mark makes an error fails the test. Left out, a test marked ``filterwarnings("error")``
    passed a program that warns. A category is one of the builtins' (a dotted one would be imported here)."""
    found = [mark for mark in marks if _parts(mark)[0] == "filterwarnings"]
    parse = getattr(sys.modules.get("_pytest.config"), "parse_warning_filter", None)
    if not found or parse is None:
        yield
        return
    with warnings.catch_warnings():
        for mark in found:
            for arg in _parts(mark)[1]:
                if not isinstance(arg, str) or "." in [*arg.split(":"), "", "", ""][2]:
                    raise TypeError(f"filterwarnings({arg!r}): only a builtin category is read here")
                warnings.filterwarnings(*parse(arg, escape=False))
        yield
