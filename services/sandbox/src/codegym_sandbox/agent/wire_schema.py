"""Frames read against their schema: the :class:`typing.TypedDict` of what the reader asked for.

A frame that crosses from a less trusted process to a more trusted one (the agent's answers to the server, the
box's reports to the agent, a test series' reports to the box, its checker's outcome to the series' process,
a notebook kernel's answers to its supervisor) is read with :func:`conform` before any field of it is used:
exactly the keys of its TypedDict (those not ``total`` may be missing, no other may be there), each of exactly
its type as the JSON parser makes it (an ``int`` is no ``bool``; a ``float`` may come as an ``int``, which is
how JSON writes ``2.0``; a tuple is a list of that many items), each size within its bound (``Max``, ``Range``
in ``Annotated``). Anything else is :class:`Malformed`. So what a handler reads is what its type says, and
"accepts only what it asked for" holds for every handler of a typed frame, not for each by its own care.

The checks are made once per type (:func:`_compile`) and cost a few microseconds per frame.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union

T = TypeVar("T")
_Check = Callable[[object, str], None]


class Malformed(ValueError):
    """A frame that is not of its schema. A ``ValueError``: where a frame that cannot be read was an error of
    the process that sent it, so is one of the wrong shape."""


@dataclass(frozen=True)
class Max:
    """The most a ``str`` (characters), ``list`` or ``dict`` (items) may hold."""

    n: int


@dataclass(frozen=True)
class Range:
    """The bounds of an ``int`` or ``float``, both included."""

    lo: float
    hi: float


def conform(value: object, kind: type[T], where: str | None = None) -> T:
    """``value``, if it is exactly of the TypedDict ``kind`` (see the module's docstring); else :class:`Malformed`."""
    hint: Any = kind  # a class: hashable, as the cache of checks wants
    _compile(hint)(value, where or kind.__name__)
    return typing.cast(T, value)


def _fail(where: str, value: object, wanted: str) -> typing.NoReturn:
    raise Malformed(f"{where}: a {type(value).__name__} where {wanted} was asked for")


@functools.cache
def _compile(hint: Any) -> _Check:
    """The check of one type: raises :class:`Malformed` for a value that is not of it."""
    if typing.is_typeddict(hint):
        return _typed_dict(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _bounded(_compile(args[0]), args[1:])
    if origin is Literal:
        allowed = tuple((type(a), a) for a in args)

        def literal(value: object, where: str) -> None:
            if (type(value), value) not in allowed:
                raise Malformed(f"{where}: none of {list(args)!r}")

        return literal
    if origin in (Union, types.UnionType):
        return _union([_compile(a) for a in args if a is not type(None)], type(None) in args)
    if origin is list:
        item = _compile(args[0])

        def a_list(value: object, where: str) -> None:
            if type(value) is not list:
                _fail(where, value, "a list")
            for one in value:
                item(one, where)

        return a_list
    if origin is tuple:
        items = [_compile(a) for a in args]

        def a_tuple(value: object, where: str) -> None:
            if type(value) is not list or len(value) != len(items):
                _fail(where, value, f"a list of {len(items)}")
            for check, one in zip(items, value, strict=True):
                check(one, where)

        return a_tuple
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"JSON keys are strings: {hint!r}")
        entry = _compile(args[1])

        def a_dict(value: object, where: str) -> None:
            if type(value) is not dict:
                _fail(where, value, "an object")
            for key, one in value.items():
                entry(one, f"{where}[{key[:40]!r}]")

        return a_dict
    if hint is float:

        def a_float(value: object, where: str) -> None:
            if type(value) is not float and type(value) is not int:
                _fail(where, value, "a number")

        return a_float
    if hint is type(None):

        def none(value: object, where: str) -> None:
            if value is not None:
                _fail(where, value, "null")

        return none
    if hint in (int, str, bool):

        def exactly(value: object, where: str) -> None:
            if type(value) is not hint:
                _fail(where, value, f"a {hint.__name__}")

        return exactly
    raise TypeError(f"no wire check for {hint!r}")


def _typed_dict(kind: Any) -> _Check:
    hints = typing.get_type_hints(kind, include_extras=True)
    fields = {key: _compile(hint) for key, hint in hints.items()}
    required, known = frozenset(kind.__required_keys__), frozenset(hints)
    name = kind.__name__

    def a_typed_dict(value: object, where: str) -> None:
        if type(value) is not dict:
            _fail(where, value, f"a {name}")
        keys = value.keys()
        if not (required <= keys <= known):
            missing, other = sorted(required - keys), sorted(k[:40] for k in keys - known)
            raise Malformed(f"{where}: a {name} without {missing!r}, or with {other!r}")
        for key in keys:
            fields[key](value[key], f"{where}.{key}")

    return a_typed_dict


def _union(options: list[_Check], none: bool) -> _Check:
    def a_union(value: object, where: str) -> None:
        if value is None and none:
            return
        errors = []
        for check in options:
            try:
                check(value, where)
            except Malformed as exc:
                errors.append(str(exc))
            else:
                return
        raise Malformed(" / ".join(errors) if errors else f"{where}: a {type(value).__name__} where None was asked for")

    return a_union


def _bounded(check: _Check, bounds: tuple[Any, ...]) -> _Check:
    limits = [b for b in bounds if isinstance(b, (Max, Range))]

    def a_bounded(value: object, where: str) -> None:
        check(value, where)
        for bound in limits:
            if isinstance(bound, Max):
                if isinstance(value, (str, list, dict)) and len(value) > bound.n:
                    raise Malformed(f"{where}: {len(value)} items (characters), more than {bound.n}")
            elif isinstance(value, (int, float)) and not bound.lo <= value <= bound.hi:
                raise Malformed(f"{where}: {value!r} is not within [{bound.lo:g}, {bound.hi:g}]")

    return a_bounded
