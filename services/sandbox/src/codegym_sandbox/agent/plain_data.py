"""Plain data between the two processes of an assert run: values as tagged JSON, and the channel.

Arguments and return values cross as plain data (None, bool, int, float, complex, ``Fraction``, ``Decimal``,
str, bytes, and lists, tuples, dicts (an ``OrderedDict`` and a ``Counter`` as themselves: their equality is not a
dict's; a ``defaultdict`` whose default a builtin type makes, as one), sets of them, exact types only: a subclass
crosses as its base type, without its methods; a named tuple as one, made again of its name and fields). A numpy
array or scalar of a plain dtype (bool, numbers, text, bytes, objects) crosses with its dtype and shape, and is
made again as one (``numpy_data``): a test of a result's dtype, or of ``isinstance(n, int)`` on an ``np.int64``,
sees what it would beside the program. Within a call, one list, dict, set or bytearray in two places is one on
both sides, and what the call changed in place of its arguments reaches the tests' own objects (``Aliases``).
Anything else stays in the program's process and is a :class:`Handle` (``program_handle``) on the checker's
side, which only equals itself and passes what is done to it on to the program's process. No code of the program's
ever runs in the checker, which reads only wire data that :func:`check` accepts (see ``checker_wire``).
"""

from __future__ import annotations

import builtins
import collections
import importlib
import keyword
import types
from collections import Counter, OrderedDict, defaultdict
from decimal import Decimal
from fractions import Fraction
from typing import Any

from . import numpy_data, value_depth
from .call_values import Aliases
from .program_handle import Handle, Refs, class_of, handle, is_class

# --- plain data on the wire ---------------------------------------------------------------------------
# JSON, with lists tagged by their first element: ["l", ...] a list, ["t", ...] a tuple and so on. Only
# exact types are read back; a subclass crosses as its base type, without its methods.


MUTABLE = (list, dict, set, bytearray)  # what a call can change in place, and what is the same object in two places


def mutable(value: Any) -> bool:
    """Whether ``value`` is one of ``MUTABLE``, or a numpy array (this module never imports numpy itself)."""
    return isinstance(value, MUTABLE) or numpy_data.is_array(value)


@value_depth.deep
def encode(value: Any, refs: Refs | None, aliases: Aliases | None = None) -> Any:
    """Plain data for ``value``; with ``refs`` (the program's side) what is not plain becomes a handle, and with
    ``aliases`` a mutable value met before is ``["a", n]``."""
    if aliases is not None and mutable(value):
        at = aliases.at(value)
        if at is not None:
            return ["a", at]
        aliases.add(value)
    return contents(value, refs, aliases)


def encode_call(args: Any, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any], Aliases]:
    """A call's arguments, given by place and by name, as the checker sends them, and their mutable values."""
    aliases = Aliases()
    sent = [encode(a, None, aliases) for a in args]
    return sent, {str(k): encode(v, None, aliases) for k, v in kwargs.items()}, aliases


def contents(value: Any, refs: Refs | None, aliases: Aliases | None = None) -> Any:
    """``value`` written out, whether or not ``aliases`` has it (what a changed argument is now)."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        number = int(value)
        return number if -(1 << 53) < number < 1 << 53 else ["i", hex(number)]
    if isinstance(value, float):
        return ["f", float(value).hex()]
    if isinstance(value, Fraction):  # numbers of the standard library, which tests compare with floats
        return ["q", hex(int(value.numerator)), hex(int(value.denominator))]
    if isinstance(value, Decimal):
        return ["m", Decimal.__str__(value)]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return ["y" if isinstance(value, bytes) else "ya", bytes(value).hex()]
    if isinstance(value, complex):
        return ["c", value.real.hex(), value.imag.hex()]
    if isinstance(value, list):
        return ["l", *(encode(v, refs, aliases) for v in list(value))]
    if isinstance(value, tuple):
        named = _fields(type(value)) if type(value) is not tuple else None
        named = named if named is not None and len(named) == len(tuple(value)) else None
        head = ["t"] if named is None else ["nt", type(value).__name__, list(named)]
        return [*head, *(encode(v, refs, aliases) for v in tuple(value))]
    if isinstance(value, dict):
        # The mappings whose equality is not a dict's cross as themselves: an OrderedDict compares its order (a
        # wrong order passed as a dict), a Counter takes a missing key for a zero (an honest one failed as a dict).
        tag = "ct" if isinstance(value, Counter) else "od" if isinstance(value, OrderedDict) else _defaulted(value)
        return [tag, *([encode(k, refs, aliases), encode(v, refs, aliases)] for k, v in dict(value).items())]
    if isinstance(value, frozenset):
        return ["fs", *(encode(v, refs, aliases) for v in frozenset(value))]
    if isinstance(value, set):
        return ["s", *(encode(v, refs, aliases) for v in set(value))]
    if isinstance(value, range):
        return ["r", value.start, value.stop, value.step]
    if isinstance(value, type) and _builtin(value):  # a builtin class as an argument: ``Suppress(KeyError)``
        return ["bt", value.__name__]
    if isinstance(value, slice):  # a tests' ``obj[1:3]`` on an object of the program's
        return ["sl", *(encode(v, refs, aliases) for v in (value.start, value.stop, value.step))]
    if isinstance(value, Handle):
        return ["h", value._ref, value._text, False]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # the tests' own arrays and scalars too
        # Its items: numbers alone, or, in an array of objects, values that may be the tests' own (a list changed).
        shared = aliases if numpy_data.of_objects(value) else None
        return numpy_data.wire(value, lambda items: encode(items, refs, shared))
    if refs is None:
        raise TypeError(f"only plain data can be passed to the program, not {type(value).__name__}")
    if isinstance(value, (types.GeneratorType, map, filter, zip, reversed, enumerate)):
        return ["g", *(encode(v, refs, aliases) for v in value)]  # an iterator crosses as what it yields
    return as_handle(value, refs)


def _defaulted(mapping: dict[Any, Any]) -> str:
    """The tag of a dict, or of a ``defaultdict`` whose default is made by one of ``_FACTORIES``: it crosses as one
    (as a dict, a right program failed a test of ``counts['absent'] == 0``, and a test's ``defaultdict(list)``
    argument made a right program's ``d[k].append(v)`` a KeyError). One of another default (a function of the
    program's) crosses as a dict: no code of the program's runs in the checker."""
    if not isinstance(mapping, defaultdict):
        return "d"
    factory = mapping.default_factory
    name = "" if factory is None else getattr(factory, "__name__", None)
    return f"dd.{name}" if name in _FACTORIES and _FACTORIES[name] is factory else "d"


def _fields(kind: type) -> tuple[str, ...] | None:
    """The fields of a named tuple's class (``collections.namedtuple``, ``typing.NamedTuple``), None for any other
    tuple's, or where they are no names a named tuple may have: it crosses as one, made again of its name and
    fields, so that ``p.x`` and ``p._replace`` work on both sides (as a plain tuple, a right program failed a test of
    ``mid(Point(0, 0), Point(2, 2)).x``). Its methods, as any class's, stay behind."""
    fields = getattr(kind, "_fields", None)
    return fields if type(fields) is tuple and _named(kind.__name__, fields) else None


def _named(name: object, fields: object) -> bool:
    """Whether ``name`` and ``fields`` make a named tuple's class (what ``collections.namedtuple`` takes)."""
    names = [name, *fields] if isinstance(fields, (tuple, list)) else []
    return (
        0 < len(names) <= _MOST_FIELDS + 1
        and all(type(n) is str and n.isidentifier() and not keyword.iskeyword(n) for n in names)
        and all(not n.startswith("_") for n in names[1:])
        and len(set(names[1:])) == len(names) - 1
    )


_MOST_FIELDS = 255  # a named tuple's fields crossing at most; one of more crosses as a tuple


_CLASSES: dict[tuple[str, tuple[str, ...]], type[tuple[Any, ...]]] = {}  # by name and fields
_MOST_CLASSES = 256  # the named tuples' classes a process makes at most; past them, a named tuple is a tuple


def _named_class(name: str, fields: tuple[str, ...]) -> type[tuple[Any, ...]] | None:
    """The class a named tuple is made again with, one for each name and fields: the values of one test are of one
    class, and compare as the program's do. A class is some 5 KB: 20,000 of them, one answer's named tuples of as
    many names (550 KB of wire data), held 106 MB in the checker; past ``_MOST_CLASSES`` a named tuple crosses as a
    tuple, as it did before."""
    made = _CLASSES.get((name, fields))
    if made is None and len(_CLASSES) < _MOST_CLASSES:
        made = _CLASSES[(name, fields)] = collections.namedtuple(name, fields)
    return made


def as_handle(value: Any, refs: Refs) -> list[Any]:
    """``value`` as a handle, whatever it is (an iterator the tests step stays one)."""
    return ["h", refs.number(value), _repr(value), callable(value), class_of(type(value), refs)]


def _builtin(kind: type) -> bool:
    return getattr(builtins, kind.__name__, None) is kind


def _repr(value: Any) -> str:
    try:
        return str(repr(value))[:200]
    except BaseException:
        return f"<{type(value).__name__}>"


_SCALARS = (type(None), bool, int, float, str)
_SEQUENCES = ("l", "t", "s", "fs", "g")  # any number of values
# A defaultdict's default, by name: builtin types that make an empty or zero value of no code (None: no default).
_FACTORIES: dict[str, type[Any] | None] = {
    "": None,
    **{k.__name__: k for k in (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, bool)},
}
MAPPINGS: dict[str, type[dict[Any, Any]]] = {
    "d": dict,
    "od": OrderedDict,
    "ct": Counter,
    **{f"dd.{name}": defaultdict for name in _FACTORIES},
}  # pairs
_MUTABLE_TAGS: dict[str, type[Any]] = {"l": list, "s": set, "ya": bytearray, **MAPPINGS}  # see ``MUTABLE``


@value_depth.deep
def check(data: Any) -> None:
    """That ``data`` is wire data as :func:`encode` writes it, exact types only; else ``ValueError``/``TypeError``.

    The checker reads nothing else from the program's process (see ``checker_wire``): once this passed,
    :func:`decode` makes only plain values and handles of it.
    """
    if type(data) in _SCALARS:
        return
    if type(data) is not list or not data or type(data[0]) is not str:
        raise TypeError(f"{type(data).__name__} is not wire data")
    tag, rest = data[0], data[1:]
    if tag in _SEQUENCES or (tag == "np" and len(rest) == 1):
        for value in rest:
            check(value)
    elif tag == "nt" and len(rest) >= 2 and _named(rest[0], rest[1]) and len(rest) == len(rest[1]) + 2:
        for value in rest[2:]:
            check(value)
    elif tag in numpy_data.TAGS:
        numpy_data.check(tag, rest, check)
    elif tag in MAPPINGS:
        for pair in rest:
            if type(pair) is not list or len(pair) != 2:
                raise TypeError("a dict's item is not a pair")
            check(pair[0])
            check(pair[1])
    elif tag in ("i", "f", "y", "ya") and len(rest) == 1 and type(rest[0]) is str:
        _number(tag, rest[0])
    elif tag == "c" and len(rest) == 2 and all(type(r) is str for r in rest):
        _number("f", rest[0])
        _number("f", rest[1])
    elif tag == "q" and len(rest) == 2 and all(type(r) is str for r in rest):
        _number("i", rest[0])
        if int(rest[1], 16) == 0:
            raise ValueError("a Fraction's denominator is 0")
    elif tag == "m" and len(rest) == 1 and type(rest[0]) is str:
        try:
            Decimal(rest[0])
        except ArithmeticError:
            raise ValueError(f"not a Decimal: {rest[0][:100]!r}") from None
    elif (tag == "r" and len(rest) == 3 and all(type(r) is int for r in rest) and rest[2] != 0) or (
        tag == "bt" and len(rest) == 1 and isinstance(getattr(builtins, str(rest[0]), None), type)
    ):
        return
    elif tag == "sl" and len(rest) == 3:
        for value in rest:
            check(value)
    elif tag == "a" and len(rest) == 1 and type(rest[0]) is int and rest[0] >= 0:
        return  # one of the call's mutable values (``Aliases``): whether there is such a one, decode finds
    elif tag != "h" or [type(r) for r in rest[:3]] != [int, str, bool] or not is_class(rest[3:]):  # a handle
        raise ValueError(f"not wire data: {str(data)[:100]}")


def _number(tag: str, text: str) -> None:
    if tag == "i":
        int(text, 16)
    elif tag == "f":
        float.fromhex(text)
    else:
        bytes.fromhex(text)


@value_depth.deep
def decode(
    data: Any, refs: list[Any] | None = None, checker: Any = None, aliases: Aliases | None = None, into: Any = None
) -> Any:
    """The value ``data`` stands for; handles resolve through ``refs`` on the program's side, ``["a", n]`` through
    ``aliases``. With ``into`` (a mutable value of ``aliases``, and ``data`` its ``contents``), that value is
    changed in place to be what ``data`` says, and returned."""
    if not isinstance(data, list):
        return data
    tag, rest = data[0], data[1:]
    if tag == "a":
        if aliases is None or not 0 <= rest[0] < len(aliases.values):
            raise ValueError(f"no value {rest[0]} of the call's")
        return aliases.values[rest[0]]
    if tag in ("np", "npa"):
        return _array(tag, rest, refs, checker, aliases, into)
    kind = _MUTABLE_TAGS.get(tag)
    if into is not None and (kind is None or not isinstance(into, kind)):
        raise ValueError(f"a {type(into).__name__} cannot become {tag!r}")
    if kind is not None:
        return _fill(tag, rest, refs, checker, aliases, into)
    if tag == "t":
        return tuple(decode(v, refs, checker, aliases) for v in rest)
    if tag == "nt":
        if not (len(rest) >= 2 and _named(rest[0], rest[1]) and len(rest) == len(rest[1]) + 2):
            raise ValueError("not a named tuple")
        values, made = [decode(v, refs, checker, aliases) for v in rest[2:]], _named_class(rest[0], tuple(rest[1]))
        return made(*values) if made is not None else tuple(values)
    if tag == "fs":
        return frozenset(decode(v, refs, checker, aliases) for v in rest)
    if tag == "i":
        return int(rest[0], 16)
    if tag == "f":
        return float.fromhex(rest[0])
    if tag == "q":
        return Fraction(int(rest[0], 16), int(rest[1], 16))
    if tag == "m":
        return Decimal(str(rest[0]))
    if tag == "c":
        return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
    if tag == "y":
        return bytes.fromhex(rest[0])
    if tag == "r":
        return range(*rest)
    if tag == "bt":
        return getattr(builtins, rest[0])
    if tag == "sl":
        return slice(*(decode(v, refs, checker, aliases) for v in rest))
    if tag == "g":
        return iter([decode(v, refs, checker, aliases) for v in rest])
    if tag == "nps":
        values = decode(rest[-1], refs, checker)
        numpy = _numpy()
        return numpy_data.value(numpy, tag, rest, values) if numpy is not None else values
    if tag == "h":
        if refs is not None:
            return refs[rest[0]]
        if checker is None:  # no process to ask: a handle that only equals itself
            return Handle(rest[0], rest[1], None, bool(rest[2]))
        return handle(rest[0], rest[1], checker, bool(rest[2]), rest[3])
    raise ValueError(f"unknown tag {tag!r}")


def _fill(tag: str, rest: list[Any], refs: Any, checker: Any, aliases: Aliases | None, into: Any) -> Any:
    """A list, mapping, set or bytearray: ``into`` changed in place, or a new one; numbered in ``aliases`` before
    its items are read, as ``encode`` numbered it before it wrote them."""
    made = into is None
    if made:
        into = _MUTABLE_TAGS[tag]() if not tag.startswith("dd.") else defaultdict(_FACTORIES[tag[3:]])
        if aliases is not None:
            aliases.add(into)
    if tag == "ya":
        into[:] = bytes.fromhex(rest[0])
    elif tag == "l":
        into[:] = [decode(v, refs, checker, aliases) for v in rest]
    elif tag == "s":
        items = {decode(v, refs, checker, aliases) for v in rest}
        into.clear()
        into.update(items)
    else:
        # Keys then values, in the order written; a Counter counts what an iterable holds, so it is set item by item.
        pairs = [(decode(k, refs, checker, aliases), decode(v, refs, checker, aliases)) for k, v in rest]
        if not made:
            into.clear()  # then filled in the changed order: an OrderedDict's move_to_end holds
        for key, item in pairs:
            into[key] = item
    return into


def _array(tag: str, rest: list[Any], refs: Any, checker: Any, aliases: Aliases | None, into: Any) -> Any:
    """A numpy array: ``into`` given its new items (and shape: ``resize`` changes it in place), or a new one,
    numbered in ``aliases`` before its items, as ``encode`` numbered it (those of an array of objects only)."""
    objects = tag == "npa" and str(rest[0]).endswith("O")
    at = aliases.reserve() if aliases is not None and into is None else None
    values = decode(rest[-1], refs, checker, aliases if objects else None)
    numpy = _numpy()
    made = (
        values if numpy is None else numpy.array(values) if tag == "np" else numpy_data.value(numpy, tag, rest, values)
    )
    if into is None:
        return aliases.put(at, made) if aliases is not None and at is not None else made
    if not numpy_data.is_array(into) or numpy is None:
        raise ValueError(f"a {type(into).__name__} cannot become {tag!r}")
    if tag == "np":  # a dtype that crossed as its items (dates): made again as the tests' array's
        made = numpy.asarray(values, dtype=into.dtype)
    if made.dtype != into.dtype:  # nothing done in place changes it
        raise ValueError(f"an array of {into.dtype} cannot become one of {made.dtype}")
    if made.shape != into.shape:
        into.resize(made.shape, refcheck=False)
    into[...] = made
    return into


def _numpy() -> Any:
    """numpy, imported here if need be, or None where the runtime has none: a numpy array of the program's is one
    in the tests too, whatever this process (a series' checker) imported before (``assert_runner.Checker.decode``)."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None
