"""The program as the module test files import it by: ``from solution import add`` (KodCode's pytest rows), ``import
solution``.

The program's process runs the program as the module ``solution`` (``program_process.MODULE``); in the checker
that name is a module whose every attribute is asked of the program's process when the tests read it, by the
checker's own rules (``Checker.names``: a stand-in for a function, the checker's own copy of a module or of a
library type, a class of the checker's for an exception type, a copy of a value). So the tests get what
they would from the program's file, and never anything the checker did not ask for. It is in ``sys.modules``
only while one run's tests run. Its ``__file__`` names :data:`FILE` in the run's directory, which holds the program's
text as the reference layout has it beside the tests (``program_file.lay_out``), so that a test that reads the
program's source (``open('solution.py')``, ``inspect.getsource(solution)``) reads the program's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

NAME = "solution"
FILE = f"{NAME}.py"  # the program's text, in the run's directory (``program_file``)
PUT_BACK = object()  # bound to a name of the program's: its own value comes back (see ``Checker.set_name``)


Names = Callable[[list[str]], dict[str, Any]]  # the program's values of the names it has among those asked
Bind = Callable[[str, Any], None]  # binds one of the program's names to a value of the tests'
Every = Callable[[], tuple[list[str], str | None]]  # the functions and classes the program defines, and its docstring
_OWN_DICT: Any = vars(types.ModuleType)["__dict__"]  # a module's own namespace, whatever its class says __dict__ is


def program_module(names: Names, bind: Bind, star: list[str], every: Every = lambda: ([], None)) -> types.ModuleType:
    """The module: ``from solution import *`` takes those of ``star`` (``program_names.star_names``) the program
    has as it runs (not one it deleted, ``del tmp``); every other attribute is read from the program's process
    when the tests read it (``names``), nothing of the checker's own among them. A function, a class or a module
    is kept once read; a value is read again each time, so that it follows the program (``solution.count`` after
    ``solution.increment()``). Its ``__dict__`` (``vars(solution)``, what doctest's finder walks) holds every function
    and class the program defines at top level (``every``: its names, and its docstring, as its text says them),
    read once the tests read it. The tests' ``solution.LIMIT = 3`` binds the program's own name, where the value
    crosses (plain data); a function of the tests' (``mock.patch("solution.f", ...)``) binds it to a stub that calls
    theirs (``Checker.set_name``), and the program's own function, set back, puts the program's back."""

    originals: dict[str, Any] = {}  # the program's own values of the names the tests bound, as they were
    filled: list[bool] = []  # whether the program's functions and classes are in its namespace yet

    class Program(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if not name.startswith("__") and callable(value) and not isinstance(value, types.ModuleType):
                # A function of the tests' (``mock.patch("solution.f")``): the program's calls of ``f`` call it; the
                # tests read it back here (``solution.f.assert_called_once()``).
                with contextlib.suppress(TypeError, ValueError, RecursionError):
                    bind(name, value)
            elif not name.startswith("__") and not isinstance(value, types.ModuleType):
                was = names([name]) if name not in originals else {}
                try:
                    bind(name, value)
                except (TypeError, ValueError, RecursionError):  # not plain data: the checker's copy alone
                    pass
                else:
                    if name in was:
                        originals[name] = was[name]
                    _OWN_DICT.__get__(self).pop(name, None)
                    return
            super().__setattr__(name, value)

        def __delattr__(self, name: str) -> None:
            # What the tests bound goes, and the program's own value comes back (pytest's ``monkeypatch`` undoes
            # a ``setattr`` so where the module's ``__dict__`` did not hold the name, as here it never does).
            if name in _OWN_DICT.__get__(self):
                value = _OWN_DICT.__get__(self).pop(name)
                if callable(value) and not isinstance(value, types.ModuleType) and not name.startswith("__"):
                    bind(name, PUT_BACK)  # a function of the tests' (a mock.patch that ends): the program's again
            elif name in originals:
                bind(name, originals[name])
            else:
                raise AttributeError(f"module {NAME!r} has no attribute {name!r} that the tests bound")

        @property
        def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
            own: dict[str, Any] = _OWN_DICT.__get__(self)
            wanted = [] if filled else [n for n in every()[0] if n not in own]
            filled.append(True)
            for key, value in (names(wanted) if wanted else {}).items():
                if callable(value) or isinstance(value, types.ModuleType):
                    own.setdefault(key, value)  # kept as read, as ``__getattr__`` keeps it
            return own

        @property
        def __doc__(self) -> str | None:  # type: ignore[override]
            return every()[1]  # the program's docstring, as its text says it

        def __getattr__(self, name: str) -> Any:
            if name == "__all__":  # what a star import takes: asked once, all together
                found = names(star)
                for key, value in found.items():
                    if callable(value) or isinstance(value, types.ModuleType):
                        _OWN_DICT.__get__(self)[key] = value  # kept as read, binding nothing of the program's
                _OWN_DICT.__get__(self)["__all__"] = [n for n in star if n in found]
                return _OWN_DICT.__get__(self)["__all__"]
            if name.startswith("__"):
                raise AttributeError(name)
            found = names([name])
            if name not in found:
                raise AttributeError(f"module {NAME!r} has no attribute {name!r}")
            if callable(found[name]) or isinstance(found[name], types.ModuleType):
                _OWN_DICT.__get__(self)[name] = found[name]  # kept as read, binding nothing of the program's
            return found[name]

    module = Program(NAME)
    module.__file__ = os.path.abspath(FILE)  # the checker's working directory is the run's
    return module


@contextlib.contextmanager
def importable(names: Names, bind: Bind, star: list[str], every: Every) -> Iterator[None]:
    """``import solution`` finds the program's module while the tests run (and nothing after)."""
    saved = sys.modules.get(NAME)
    sys.modules[NAME] = program_module(names, bind, star, every)
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(NAME, None)
        else:
            sys.modules[NAME] = saved
