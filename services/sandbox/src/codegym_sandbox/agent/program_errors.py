"""The program's exceptions as the tests see them: made in the checker from what the program's process answered
(a class of the checker's for each of the program's types, deriving from the nearest builtin type; never one
that drives the tests' control flow), marked as the program's, and the
exceptions that stand for the program's process ending or being interrupted while the tests ran."""

from __future__ import annotations

import builtins
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from . import checker_wire
from .checker_wire import ProgramWarning

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


class ProgramExit(SystemExit):
    """The program raised ``SystemExit`` while the tests called it (``sys.exit(2)`` of an argparse error).

    The tests' ``pytest.raises(SystemExit)`` and ``except SystemExit`` catch it, as beside the program; one they let
    through is no exit of theirs, and never ends them as passed (``test_forms.ended_well``).
    """


class ProgramEnded(BaseException):
    """The program's process ended while the tests were still running.

    Not an ``Exception``: tests that catch everything a call raises must not run on past it.
    """


class _Unimported:
    """What the tests get for a name the program bound to a module the checker may not import: any use of it is
    the program's error."""

    def __init__(self, name: str, module: str) -> None:
        self._why = f"{name} is the module {module}, which the tests cannot import"

    def __getattr__(self, attribute: str) -> NoReturn:
        raise ProgramError(self.__dict__.get("_why", "a module the tests cannot import"))

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ProgramError(self._why)


def unimported(name: str, module: str) -> Any:
    return _Unimported(name, module)


def undefined(name: str) -> Callable[..., NoReturn]:
    def undefined(*args: Any, **kwargs: Any) -> NoReturn:
        raise NameError(f"name {name!r} is not defined")

    return undefined


def local_exception(error: checker_wire.ErrorAnswer, classes: ExceptionClasses | None = None) -> BaseException:
    name, message, text = error["name"], error["message"], error["traceback"]
    kind = getattr(builtins, name, None) if error["module"] == "builtins" else None
    exc: BaseException
    if not isinstance(kind, type) or not issubclass(kind, BaseException) or issubclass(kind, ITERATION_ENDS):
        exc = ProgramError(f"{name}: {message}")
    elif kind is SystemExit:  # of its own class (``class Quit(SystemExit)``), with its code
        own = classes.of(error["lineage"], ProgramExit) if classes is not None else ProgramExit
        exc = _made(own, tuple(error["args"]), error["attributes"], message) or ProgramExit(*error["args"][:1])
    elif issubclass(kind, INTERRUPTS):
        exc = ProgramInterrupt(f"{name}: {message}")
    else:
        own = classes.of(error["lineage"], kind) if classes is not None else kind
        args = tuple(error["args"]) if error["args"] or not message else (message,)
        made = _made(own, args, error["attributes"], message) if own is not kind else None
        if made is not None:
            exc = made
        else:
            # With its arguments (``KeyError("k")``, not the text ``'k'``); else the first of its bases made of a
            # message alone (UnicodeDecodeError takes five arguments: a ValueError).
            for base, given in ((kind, args), *((b, (message,)) for b in kind.__mro__)):
                try:
                    exc = base(*given)
                    break
                except BaseException:
                    continue
            else:
                exc = ProgramError(f"{name}: {message}")
    exc.__dict__[FROM_PROGRAM] = text.rstrip()  # first: nothing below may leave it unmarked
    if hasattr(BaseException, "add_note"):  # BaseException's own: an attribute of the program's is not asked
        BaseException.add_note(exc, "In the program:\n" + text.rstrip())
    return exc


def nearest_builtin(lineage: list[list[str]]) -> type[BaseException]:
    """The builtin type the checker's class for a program's exception type derives from (see ``local_exception``):
    its lineage's first builtin, but a ``ProgramError`` for what would end the tests' loop, a
    ``ProgramInterrupt`` for what would stop the interpreter (a ``ProgramExit`` for an exit)."""
    for kind in _builtins_of(lineage):
        if issubclass(kind, ITERATION_ENDS):
            return ProgramError
        if kind is SystemExit:
            return ProgramExit
        return ProgramInterrupt if issubclass(kind, INTERRUPTS) else kind
    return Exception


def _builtins_of(lineage: list[list[str]]) -> Iterator[type[BaseException]]:
    """The builtin exception types a lineage names, in its order (its first :data:`LINEAGE` entries)."""
    for entry in lineage[:LINEAGE]:
        kind = getattr(builtins, entry[1], None) if len(entry) == 2 and entry[0] == "builtins" else None
        if isinstance(kind, type) and issubclass(kind, BaseException):
            yield kind


def _made(
    kind: type[BaseException], args: tuple[Any, ...], attributes: dict[str, Any], message: str
) -> BaseException | None:
    """An exception of ``kind`` with ``args`` and ``attributes``, made without running its ``__init__`` (a
    library's class may want other arguments than its message); None where that fails. Its text, where ``kind``
    is a class made for one of the program's, is the program's ``message`` (its own ``__str__``'s)."""
    try:
        exc = kind.__new__(kind, *args)
        exc.args = args
        exc.__dict__[_MESSAGE] = message
        for key, value in attributes.items():
            if not key.startswith("_"):
                setattr(exc, key, value)
        return exc
    except Exception:
        return None


# The standard library's modules whose exceptions drive a test runner, not a test: never one of the program's.
_RUNNERS = frozenset({"unittest", "doctest", "bdb", "pdb", "__main__", "builtins"})


class ExceptionClasses:
    """The checker's classes for the program's exception types, one per class of the program's, so that the
    tests' ``except InvalidInput`` (a name they take from the program) catches what the program raises, and
    ``except json.JSONDecodeError`` the program's ``JSONDecodeError``.

    Made from the lineage the program's process answers (``checker_wire.ErrorAnswer``): a class of the
    standard library the checker has already imported stands for itself (none that drives a test runner); any
    other is a new class of its name, each deriving from the next in the lineage, and the last from every builtin
    type of the lineage that no other derives from. They are the program's word, and catch nothing of the tests'
    own.
    """

    MOST = 256  # classes made for one run: past them, the program's types are their nearest known class

    def __init__(self) -> None:
        self.warned: dict[Any, Any] = {}  # the registry of the warnings issued here, as a module's
        self.made: dict[tuple[str, str], type[BaseException]] = {}

    def reissue(self, issued: list[ProgramWarning]) -> None:
        """The warnings the program issued in a call, issued here, where the tests' filters see them as they would
        in one process (``pytest.warns``), each of its category's class (a category that is no warning: none)."""
        for warning in issued[:64]:
            category = self.of(warning["lineage"], nearest_builtin(warning["lineage"]))
            # A file name in brackets: what the warning shows is no line the checker reads (``/proc/self/status``).
            where = warning["filename"] if warning["filename"].startswith("<") else f"<{warning['filename']}>"
            if issubclass(category, Warning):
                warnings.warn_explicit(warning["message"], category, where, warning["lineno"], "solution", self.warned)

    def of(self, lineage: list[list[str]], builtin: type[BaseException]) -> type[BaseException]:
        """The class for the type whose lineage is ``lineage`` and whose nearest builtin type is ``builtin``: one
        of each of the lineage's builtin types too (``class ConfigError(KeyError, ValueError)``)."""
        lineage = lineage[:LINEAGE]  # what the program's process sends (a forged answer may send more)
        own = [(e[0], e[1]) for e in lineage if len(e) == 2 and e[0] != "builtins"]
        needed = _builtin_leaves(lineage, builtin)
        base: type[BaseException] | None = None
        for key in reversed(own):
            made = self.made.get(key)
            if made is None:
                if len(self.made) >= self.MOST:  # a program that makes a type per raise: the checker's memory
                    return base or builtin
                above: tuple[type[BaseException], ...] = (base,) if base is not None else ()
                bases = (*above, *(k for k in needed if not any(issubclass(b, k) for b in above)))
                made = _library_class(*key, bases[0]) or _new_class(*key, bases)
                self.made[key] = made
            base = made
        if base is None:
            return builtin
        missing = tuple(k for k in needed if not issubclass(base, k))
        # A class made before, for a type the tests named, lacks a builtin type this one has: a subclass of it that
        # has it too (the tests' ``except AppError`` catches the program's ``NotFound(AppError, KeyError)``).
        if missing and len(self.made) < self.MOST:
            base = self.made[own[0]] = _new_class(*own[0], (base, *missing))
        return base


def _library_class(module: str, qualname: str, base: type[BaseException]) -> type[BaseException] | None:
    """The standard library's class ``module.qualname``, where the checker has imported its module already and
    it derives from ``base`` (and from ``Exception``); else None. Never an import: the name is the program's."""
    if module.partition(".")[0] not in sys.stdlib_module_names or module.partition(".")[0] in _RUNNERS:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None and not part.startswith("__") else None
    if isinstance(found, type) and issubclass(found, Exception) and issubclass(found, base):
        return found
    return None


_MESSAGE = "_codegym_message"  # on an exception made for the program's: its text as the program gave it


def _program_text(self: BaseException) -> str:
    text = self.__dict__.get(_MESSAGE)
    return text if isinstance(text, str) else BaseException.__str__(self)


def _builtin_leaves(lineage: list[list[str]], builtin: type[BaseException]) -> tuple[type[BaseException], ...]:
    """The builtin types of ``lineage`` that none other of them derives from, ``builtin`` first (none that would
    drive the tests' control flow)."""
    kinds = [builtin, *(kind for kind in _builtins_of(lineage) if not issubclass(kind, _CONTROL))]
    unique = list(dict.fromkeys(kinds))
    return tuple(k for k in unique if not any(o is not k and issubclass(o, k) for o in unique))


_CONTROL = (*ITERATION_ENDS, *INTERRUPTS)


def _new_class(module: str, qualname: str, bases: tuple[type[BaseException], ...]) -> type[BaseException]:
    name = qualname.rpartition(".")[2]
    name = name if name.isidentifier() else "ProgramException"
    namespace = {"__module__": module, "__str__": _program_text}
    try:
        made = type(name, bases, namespace)
    except TypeError:  # builtin types that cannot be bases together (their layouts differ): the first alone
        made = type(name, bases[:1], namespace)
    made.__qualname__ = qualname
    return made


LINEAGE = 16  # the classes of an exception type's lineage that count: its own first (``program_process`` sends them)
FROM_PROGRAM = "_codegym_from_program"  # on every exception made from the program's: its traceback there


def program_traceback(exc: BaseException) -> str | None:
    """The program's traceback of ``exc``, if the program raised it; else None."""
    text = getattr(exc, "__dict__", {}).get(FROM_PROGRAM)
    return text if isinstance(text, str) else None
