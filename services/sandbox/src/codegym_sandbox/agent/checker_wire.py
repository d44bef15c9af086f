"""What the program's process may answer the checker, and the checker's reading of it: only what it asked for.

The program's process is the program's: whatever runs there (the program patches the agent's modules, or
finds the channel and writes to it) can answer anything. So each answer is a JSON object of one
:class:`typing.TypedDict` below, the one the checker's request expects, or an :class:`ErrorAnswer`; the
checker reads it with :func:`read`, which accepts exactly that type's keys, each of exactly its type (no
subclass: what the JSON parser makes), and wire data (``Data``) only in the shapes ``plain_data.check``
accepts. A names answer holds only names the checker asked for (:func:`names`), and an argument the program
changed in place is one it was passed (:func:`changed`). Anything else is a :class:`Breach`: the run is an
error, whatever the tests catch.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, TypedDict, TypeVar

from .plain_data import check as check_data

# Wire data (see ``plain_data``): a value, or a handle to one that stayed in the program's process.
Data = Annotated[Any, "plain data"]


class NamesAnswer(TypedDict):
    """The program's values of the names asked for (those of them it has): the checker makes a stand-in
    for each function, imports its own copy of each module, and decodes each value."""

    functions: list[str]
    modules: dict[str, list[Data]]  # name -> [the module's name, the module as a handle]
    exceptions: dict[str, list[list[str]]]  # name -> the exception class's lineage (see ErrorAnswer)
    library: dict[str, list[str]]  # name -> [module, name]: a type of ``program_names.LIBRARY_TYPES``
    values: dict[str, Data]


class ProgramWarning(TypedDict):
    """A warning the program issued in a call: its category's lineage (as an :class:`ErrorAnswer`'s), its message,
    and where."""

    lineage: list[list[str]]
    message: str
    filename: str
    lineno: int


class CallAnswer(TypedDict):
    """What a call returned, the tests' values the call changed in place (by their number among its arguments' lists,
    dicts, sets and bytearrays, as a string: ``plain_data.Aliases``), and the warnings it issued."""

    value: Data
    changed: dict[str, Data]
    warnings: list[ProgramWarning]


class ValueAnswer(TypedDict):
    """What an operation on a handle gave (an attribute, an item, the length, ...)."""

    value: Data


class SameAnswer(TypedDict):
    """Whether two of the program's objects are equal, by the program's own ``==``."""

    same: bool


class OutputAnswer(TypedDict):
    """What the program printed since the tests' ``capsys`` began or last read it (see ``pytest_fixtures``)."""

    out: str
    err: str


class Callback(TypedDict):
    """What the program's process asks the checker for, where the tests patched what it uses (see
    ``patched_builtins``): ``op`` (``input``, ``print``, one of ``sys.stdin``'s reads, or ``call``: the function
    of the tests' bound to the program's ``name``), with the arguments the program passed (``file`` for ``print``:
    ``""``, ``stdout`` or ``stderr``)."""

    op: str
    name: str
    args: list[Data]
    kwargs: dict[str, Data]
    file: str


class ErrorAnswer(TypedDict):
    """An exception the program raised: its nearest builtin type's module and name, its message, its traceback;
    its type's lineage (the classes of its MRO before ``object``, each as its module and qualified name, itself
    first), and its arguments and public attributes where they are plain scalars (else none)."""

    module: str
    name: str
    message: str
    traceback: str
    lineage: list[list[str]]
    args: list[Data]
    attributes: dict[str, Data]


class CallRaised(TypedDict):
    """A call that raised: what it raised, and what it changed first of what it was given (as in a
    :class:`CallAnswer`)."""

    error: ErrorAnswer
    changed: dict[str, Data]


class Breach(BaseException):
    """The program's process answered what the checker did not ask for.

    Not an ``Exception``: the tests' ``except Exception`` must not turn it into a pass.
    """


class Raised(Exception):
    """The program's process answered with an :class:`ErrorAnswer`: the program raised ``error``, and in a call had
    ``changed`` what it was given first (as in :class:`CallAnswer`)."""

    def __init__(self, error: ErrorAnswer, changed: dict[str, Data]) -> None:
        super().__init__(error["name"])
        self.error, self.changed = error, changed


T = TypeVar("T")


def read(answer: object, kind: type[T]) -> T:
    """``answer`` as ``kind``, if it is exactly that; :class:`Raised` if it is an error; else :class:`Breach`."""
    if type(answer) is dict and "error" in answer and answer.keys() <= {"error", "changed"}:
        changed = _typed(answer.get("changed", {}), dict[str, Data], "changed")
        raise Raised(_typed(answer["error"], ErrorAnswer, "error"), changed)
    typed: T = _typed(answer, kind, kind.__name__)
    return typed


def callback(answer: object) -> Callback | None:
    """``answer`` as the program's process's callback (see :class:`Callback`), None where it is none: a
    ``{"callback": ...}`` object that is not one exactly is a :class:`Breach`."""
    if type(answer) is not dict or answer.keys() != {"callback"}:
        return None
    typed: Callback = _typed(answer["callback"], Callback, "callback")
    return typed


def names(answer: NamesAnswer, wanted: frozenset[str]) -> NamesAnswer:
    """``answer``, if it names nothing but names asked for, each once."""
    given = [*answer["functions"], *answer["modules"], *answer["exceptions"], *answer["library"], *answer["values"]]
    if len(given) != len(set(given)) or not wanted.issuperset(given):
        raise Breach(f"the program's process answered for names not asked for: {sorted(set(given) - wanted)!r}")
    return answer


def changed(answer: dict[str, Data], given: int) -> list[tuple[int, Data]]:
    """The tests' values a call changed in place, each by its number among the ``given`` lists, dicts, sets and
    bytearrays of its arguments (``plain_data.Aliases``), with what it is now, in the order the program's process
    wrote them."""
    out = []
    for key, data in answer.items():
        index = int(key) if key.isascii() and key.isdecimal() and len(key) < 10 and str(int(key)) == key else -1
        if not 0 <= index < given:
            raise Breach(f"the program's process changed a value it was not passed: {key[:100]!r}")
        out.append((index, data))
    return sorted(out, key=lambda pair: pair[0])


def _typed(value: object, kind: Any, where: str) -> Any:
    """``value``, checked against the type ``kind`` (a TypedDict, or what its fields are)."""
    if typing.is_typeddict(kind):
        hints = _hints(kind)
        if type(value) is not dict or value.keys() != hints.keys():
            raise Breach(f"the program's process answered {where} with other keys than asked")
        for key, hint in hints.items():
            _typed(value[key], hint, f"{where}.{key}")
        return value
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Annotated:  # wire data
        try:
            check_data(value)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise Breach(f"the program's process answered {where} with what is not plain data: {exc}") from None
    elif origin is list:
        if type(value) is not list:
            raise Breach(f"the program's process answered {where} with a {type(value).__name__}")
        for item in value:
            _typed(item, args[0], where)
    elif origin is dict:
        if type(value) is not dict:
            raise Breach(f"the program's process answered {where} with a {type(value).__name__}")
        for item in value.values():
            _typed(item, args[1], where)  # JSON keys are str
    elif type(value) is not kind:
        raise Breach(f"the program's process answered {where} with a {type(value).__name__}, not a {kind.__name__}")
    return value


def _hints(kind: Any) -> dict[str, Any]:
    return _HINTS[kind]


# Every answer's type hints, read as the module loads (``typing`` evaluates them as code, with ``eval``): the agent
# loads it before any checker or judge is made, so no judge runs code of its own that is not its tests' once its
# guard is armed (``import_path.Guard``: such code taints the run, and no exit of the tests' said they passed then;
# a run judged on its own read them lazily, and every ``sys.exit(0)`` of its tests failed, round 60).
_HINTS = {
    value: typing.get_type_hints(value, include_extras=True)
    for value in list(globals().values())
    if typing.is_typeddict(value)
}
