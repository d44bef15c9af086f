"""Tests that run the program's docstring examples with doctest (``doctest.testmod()``, ``testmod(solution)``,
``run_docstring_examples``, ``DocTestSuite``): doctest's finder reads the stand-ins of the program's functions, which
carry their docstrings as the program's text says them (``program_function``), and their examples run through the
stand-ins, in the program's process. Where the examples are in a docstring no stand-in carries (a class's, its
methods', a decorated function's, the program's own where the tests' module stands for it), a search that reaches
that object of the program's is the run's error (``program_text.NotCarried``): it would find none of them, and a
test of ``failed == 0`` would pass any program. The examples of ``testmod(solution)`` see every top-level name of
the program's, its values too (which ``solution``'s ``__dict__`` does not hold: read there, they follow the program).
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any, Protocol

from . import program_module, program_names
from .program_function import ProgramFunction
from .program_handle import Handle
from .program_text import NotCarried, Text


class Program(Protocol):
    """What the checker knows of the program (``assert_runner.Checker``)."""

    text: Text
    module_name: str  # the module its functions say they are of: the tests' ``__main__``, or ``solution``
    defined: frozenset[str]  # the names it binds at top level

    def names(self, wanted: list[str]) -> dict[str, Any]: ...


@contextlib.contextmanager
def guarded(code: types.CodeType, program: Program) -> Iterator[None]:
    """doctest's finder, while the tests ``code`` run, refuses a search that would miss the program's examples, and
    gives those of ``solution`` the program's names."""
    if "doctest" not in program_names.used_names(code):
        yield
        return
    import doctest

    find = doctest.DocTestFinder.find

    def checked(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        found = find(self, obj, *args, **kwargs)
        _refuse_missed(obj, program.text, program.module_name)
        if found and isinstance(obj, types.ModuleType) and obj is sys.modules.get(program_module.NAME):
            wanted = [n for n in sorted(program.defined) if not n.startswith("__") and n not in found[0].globs]
            named = program.names(wanted) if wanted else {}
            for test in found:
                for name, value in named.items():
                    test.globs.setdefault(name, value)
        return found

    doctest.DocTestFinder.find = checked  # type: ignore[method-assign]
    try:
        yield
    finally:
        doctest.DocTestFinder.find = find  # type: ignore[method-assign]


def _refuse_missed(obj: Any, text: Text, module_name: str) -> None:
    missed = text.uncarried_examples()
    if not missed:
        return
    if isinstance(obj, types.ModuleType):
        if "__doc__" in missed and module_name == "__main__" and obj is sys.modules.get("__main__"):
            raise NotCarried("doctest: the examples of the program's docstring are not carried to the tests")
        values = dict(vars(obj))
    else:
        values = {str(getattr(obj, "__name__", "")): obj}
    for name, value in values.items():
        if name in missed and _programs(value):
            raise NotCarried(f"doctest: the examples of the program's {name} are not carried to the tests")


def _programs(value: Any) -> bool:
    # A class of the program's crosses as a handle (of its class object), as do its objects.
    return (
        type(value) is ProgramFunction
        or isinstance(value, Handle)
        or (isinstance(value, type) and issubclass(value, Handle))
    )
