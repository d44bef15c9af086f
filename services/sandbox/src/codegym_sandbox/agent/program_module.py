"""The program as the module test files import it by: ``from solution import add`` (KodCode's pytest rows), ``import
solution``.

The program's process runs the program as the module ``solution`` (``program_process.MODULE``); in the checker
that name is a module whose every attribute is asked of the program's process when the tests read it, by the
checker's own rules (``Checker.names``: a stand-in for a function, the checker's own copy of a module or of a
library type, a class of the checker's for an exception type, a copy of a value). So the tests get what
they would from the program's file, and never anything the checker did not ask for. It is in ``sys.modules``
only while one run's tests run.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

NAME = "solution"


def program_module(resolve: Callable[[str], Any], star: list[str]) -> types.ModuleType:
    """The module: ``from solution import *`` takes ``star`` (``program_names.star_names``); every other
    attribute is read from the program's process when the tests read it (``resolve``), nothing of the
    checker's own among them. A function, a class or a module is kept once read; a value is read again each
    time, so that it follows the program (``solution.count`` after ``solution.increment()``)."""

    class Program(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            value = resolve(name)
            if callable(value) or isinstance(value, types.ModuleType):
                setattr(self, name, value)
            return value

    module = Program(NAME)
    module.__dict__["__all__"] = star
    return module


@contextlib.contextmanager
def importable(resolve: Callable[[str], Any], star: list[str]) -> Iterator[None]:
    """``import solution`` finds the program's module while the tests run (and nothing after)."""
    saved = sys.modules.get(NAME)
    sys.modules[NAME] = program_module(resolve, star)
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(NAME, None)
        else:
            sys.modules[NAME] = saved
