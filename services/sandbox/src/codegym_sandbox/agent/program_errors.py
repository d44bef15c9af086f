"""The program's exceptions as the tests see them: made in the checker from what the program's process answered
(the nearest builtin type, never one that drives the tests' control flow), marked as the program's, and the
exceptions that stand for the program's process ending or being interrupted while the tests ran."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, NoReturn

from . import checker_wire

# What a program's exception may not arrive as in the checker (see the module's docstring): those that end
# a loop of the tests' arrive as a ProgramError, those that stop the interpreter as a ProgramInterrupt.
ITERATION_ENDS = (StopIteration, StopAsyncIteration)
INTERRUPTS = (SystemExit, KeyboardInterrupt, GeneratorExit)


class ProgramError(Exception):
    """The program raised an exception of its own type while the tests called it."""


class ProgramInterrupt(BaseException):
    """The program raised ``KeyboardInterrupt`` or ``GeneratorExit`` while the tests called it.

    Not an ``Exception``, as these are not: ``except Exception`` in the tests lets it through, as it would
    let the program's own through beside the program.
    """


class ProgramEnded(BaseException):
    """The program's process ended while the tests were still running.

    Not an ``Exception``: tests that catch everything a call raises must not run on past it.
    """


def undefined(name: str) -> Callable[..., NoReturn]:
    def undefined(*args: Any, **kwargs: Any) -> NoReturn:
        raise NameError(f"name {name!r} is not defined")

    return undefined


def local_exception(error: checker_wire.ErrorAnswer) -> BaseException:
    name, message, text = error["name"], error["message"], error["traceback"]
    kind = getattr(builtins, name, None) if error["module"] == "builtins" else None
    exc: BaseException
    if not isinstance(kind, type) or not issubclass(kind, BaseException) or issubclass(kind, ITERATION_ENDS):
        exc = ProgramError(f"{name}: {message}")
    elif issubclass(kind, INTERRUPTS):
        exc = ProgramInterrupt(f"{name}: {message}")
    else:
        # The first of its bases made of a message alone (UnicodeDecodeError takes five arguments: a ValueError).
        for base in kind.__mro__:
            try:
                exc = base(message)
                break
            except BaseException:
                continue
        else:
            exc = ProgramError(f"{name}: {message}")
    if hasattr(exc, "add_note"):
        exc.add_note("In the program:\n" + text.rstrip())
    exc.__dict__[FROM_PROGRAM] = text.rstrip()
    return exc


FROM_PROGRAM = "_codegym_from_program"  # on every exception made from the program's: its traceback there


def program_traceback(exc: BaseException) -> str | None:
    """The program's traceback of ``exc``, if the program raised it; else None."""
    text = getattr(exc, "__dict__", {}).get(FROM_PROGRAM)
    return text if isinstance(text, str) else None
