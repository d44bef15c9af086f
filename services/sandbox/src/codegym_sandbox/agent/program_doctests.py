"""Tests that run docstring examples with doctest (``doctest.testmod()``, ``testmod(solution)``,
``run_docstring_examples``, ``DocTestSuite``, ``testfile``): doctest's finder reads the stand-ins of the program's
functions, which carry their docstrings as the program's text says them (``program_function``), so the tests find,
count and read the program's examples. They never run here: doctest's runner runs an example's source with ``exec``
in the process that runs it, and an example of the program's is the program's code (one that walks the frames up
to the tests' rebinds their names, and a wrong program passes their asserts). So a run of examples any of which the
tests' own strings do not hold (their docstrings, the strings they build a test from) is refused, the run's error
(``uncarried.Refused``), whatever the tests catch: never a pass. The tests' own examples run as before, through the
stand-ins. Where the examples are in a docstring no stand-in carries (a class's, its methods', a decorated
function's, the program's own where the tests' module stands for it), a search that reaches that object of the
program's is the run's error (``program_text.NotCarried``): it would find none of them, and a test of
``failed == 0`` would pass any program.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any, Protocol

from . import import_path, program_module, program_names
from .program_function import ProgramFunction
from .program_handle import Handle
from .program_text import NotCarried, Text
from .uncarried import Turns


class Program(Protocol):
    """What the checker knows of the program (``assert_runner.Checker``)."""

    text: Text
    module_name: str  # the module its functions say they are of: the tests' ``__main__``, or ``solution``
    defined: frozenset[str]  # the names it binds at top level
    turns: Turns  # its refusals: the run's error

    def names(self, wanted: list[str]) -> dict[str, Any]: ...


@contextlib.contextmanager
def guarded(code: types.CodeType, program: Program) -> Iterator[None]:
    """doctest's finder, while the tests ``code`` run, refuses a search that would miss the program's examples, and
    gives those of ``solution`` the program's names; its runner runs only examples the tests hold."""
    if "doctest" not in program_names.used_names(code):
        yield
        return
    import doctest

    find, run = doctest.DocTestFinder.find, doctest.DocTestRunner._DocTestRunner__run  # type: ignore[attr-defined]
    own: list[set[str]] = []

    def running(self: Any, test: Any, *args: Any, **kwargs: Any) -> Any:
        if not own:
            own.append(import_path.string_lines(code))
        for example in getattr(test, "examples", ()):
            if not {line.strip() for line in str(example.source).splitlines()} - {""} <= own[0]:
                program.turns.refuse(
                    f"doctest: the examples of {getattr(test, 'name', '?')} are not the tests' own: an example of "
                    "the program's is its code, which never runs in the checker"
                )
        return run(self, test, *args, **kwargs)

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
    doctest.DocTestRunner._DocTestRunner__run = running  # type: ignore[attr-defined]
    try:
        yield
    finally:
        doctest.DocTestFinder.find = find  # type: ignore[method-assign]
        doctest.DocTestRunner._DocTestRunner__run = run  # type: ignore[attr-defined]


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
