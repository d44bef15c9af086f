"""Plain data between the two processes of an assert run: values as tagged JSON, handles, the channel.

Arguments and return values cross as plain data (None, bool, int, float, complex, ``Fraction``, ``Decimal``,
str, bytes, and lists, tuples, dicts (an ``OrderedDict`` and a ``Counter`` as themselves: their equality is not a
dict's), sets of them, exact types only: a subclass crosses as its base type, without its methods). A numpy
array or scalar of a plain dtype (bool, numbers, text, bytes, objects) crosses with its dtype and shape, and is
made again as one (``numpy_data``): a test of a result's dtype, or of ``isinstance(n, int)`` on an ``np.int64``,
sees what it would beside the program.
Anything else stays in the program's process and is a :class:`Handle` on the checker's side, which only
equals itself and passes what is done to it on to the program's process. No code of the program's ever
runs in the checker, which reads only wire data that :func:`check` accepts (see ``checker_wire``).
"""

from __future__ import annotations

import importlib
import json
import marshal
import os
import struct
import types
from collections import Counter, OrderedDict
from decimal import Decimal
from fractions import Fraction
from typing import Any

from . import handle_operators, numpy_data

# --- plain data on the wire ---------------------------------------------------------------------------
# JSON, with lists tagged by their first element: ["l", ...] a list, ["t", ...] a tuple and so on. Only
# exact types are read back; a subclass crosses as its base type, without its methods.


class Handle:
    """A value that stayed in the program's process, and can be passed back to it.

    It never equals plain data. Two handles are compared by the program (both sides are its own objects,
    such as instances of a class it defines).
    """

    def __init__(self, ref: int, text: str, checker: Any = None, callable_: bool = False) -> None:
        self._ref, self._text, self._checker, self._callable = ref, text, checker, callable_

    def __repr__(self) -> str:
        return self._text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Handle):
            return False
        return other._ref == self._ref or (self._checker is not None and self._checker.same(self._ref, other._ref))

    def __hash__(self) -> int:
        return hash(("handle", self._ref))

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # ``class TestX(Base)`` on a class of the program's: no class here can have it as a base (the class
        # statement would otherwise make a handle, and a runner would find no tests in it).
        raise TypeError(f"{self._text}, of the program's, cannot be a base of a class of the tests")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._callable or self._checker is None:
            raise TypeError(f"{self._text} is not callable")
        return self._checker.call(["ref", self._ref], args, kwargs)

    # What tests do with an object of the program's (``Solution().twoSum(...)``, ``len(tree)``, ``obj.val``):
    # done by the program's process on its own object; only the plain data (or a handle) comes back.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_checker") is None:
            raise AttributeError(name)  # protocols the interpreter probes (copy, pickle): not the program's
        return self._checker.operate("getattr", self._ref, name)

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key)

    def __len__(self) -> int:
        length = self._ask("len")
        if type(length) is not int:  # plain data, exactly: nothing of the program's runs here
            raise TypeError(f"the length of {self._text} is not an int")
        return length

    def __iter__(self) -> Any:
        return iter(self._ask("iter"))

    def __contains__(self, item: Any) -> bool:
        return self._ask("contains", item) is True

    def __bool__(self) -> bool:
        return self._ask("bool") is True

    def __str__(self) -> str:
        text = self._ask("str")
        if type(text) is not str:
            raise TypeError(f"str() of {self._text} is not a str")
        return text

    def __format__(self, spec: str) -> str:
        text = self._ask("format", spec)
        if type(text) is not str:
            raise TypeError(f"format() of {self._text} is not a str")
        return text

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            self._ask("setattr", name, value)

    def __delattr__(self, name: str) -> None:
        self._ask("delattr", name)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ask("setitem", key, value)

    def __delitem__(self, key: Any) -> None:
        self._ask("delitem", key)

    def _ask(self, op: str, *args: Any) -> Any:
        if self._checker is None:
            raise TypeError(f"{self._text} does not support {op}")
        return self._checker.operate(op, self._ref, *args)


_OWN = frozenset({"_ref", "_text", "_checker", "_callable"})  # a handle's own attributes; any other is the object's


handle_operators.install(Handle)  # its operators: the program's, never with a comparison of the tests' values


def encode(value: Any, refs: list[Any] | None) -> Any:
    """Plain data for ``value``; with ``refs`` (the program's side) what is not plain becomes a handle."""
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
        return ["l", *(encode(v, refs) for v in list(value))]
    if isinstance(value, tuple):
        return ["t", *(encode(v, refs) for v in tuple(value))]
    if isinstance(value, dict):
        # The mappings whose equality is not a dict's cross as themselves: an OrderedDict compares its order (a
        # wrong order passed as a dict), a Counter takes a missing key for a zero (an honest one failed as a dict).
        tag = "ct" if isinstance(value, Counter) else "od" if isinstance(value, OrderedDict) else "d"
        return [tag, *([encode(k, refs), encode(v, refs)] for k, v in dict(value).items())]
    if isinstance(value, frozenset):
        return ["fs", *(encode(v, refs) for v in frozenset(value))]
    if isinstance(value, set):
        return ["s", *(encode(v, refs) for v in set(value))]
    if isinstance(value, range):
        return ["r", value.start, value.stop, value.step]
    if isinstance(value, Handle):
        return ["h", value._ref, value._text, False]
    if refs is None:
        raise TypeError(f"only plain data can be passed to the program, not {type(value).__name__}")
    if isinstance(value, (types.GeneratorType, map, filter, zip, reversed, enumerate)):
        return ["g", *(encode(v, refs) for v in value)]  # an iterator crosses as what it yields
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return numpy_data.wire(value, lambda items: encode(items, refs))
    refs.append(value)
    return ["h", len(refs) - 1, _repr(value), callable(value)]


def _repr(value: Any) -> str:
    try:
        return str(repr(value))[:200]
    except BaseException:
        return f"<{type(value).__name__}>"


_SCALARS = (type(None), bool, int, float, str)
_SEQUENCES = ("l", "t", "s", "fs", "g")  # any number of values
_MAPPINGS: dict[str, type[dict[Any, Any]]] = {"d": dict, "od": OrderedDict, "ct": Counter}  # pairs


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
    elif tag in numpy_data.TAGS:
        numpy_data.check(tag, rest, check)
    elif tag in _MAPPINGS:
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
    elif tag == "r" and len(rest) == 3 and all(type(r) is int for r in rest) and rest[2] != 0:
        return
    elif tag != "h" or [type(r) for r in rest] != [int, str, bool]:  # a handle: its number, repr, callable
        raise ValueError(f"not wire data: {str(data)[:100]}")


def _number(tag: str, text: str) -> None:
    if tag == "i":
        int(text, 16)
    elif tag == "f":
        float.fromhex(text)
    else:
        bytes.fromhex(text)


def decode(data: Any, refs: list[Any] | None = None, checker: Any = None) -> Any:
    """The value ``data`` stands for; handles resolve through ``refs`` on the program's side."""
    if not isinstance(data, list):
        return data
    tag, rest = data[0], data[1:]
    if tag == "l":
        return [decode(v, refs, checker) for v in rest]
    if tag == "t":
        return tuple(decode(v, refs, checker) for v in rest)
    if tag in _MAPPINGS:
        items = {decode(k, refs, checker): decode(v, refs, checker) for k, v in rest}
        return items if tag == "d" else _MAPPINGS[tag](items)  # a Counter counts what an iterable holds: a mapping
    if tag == "s":
        return {decode(v, refs, checker) for v in rest}
    if tag == "fs":
        return frozenset(decode(v, refs, checker) for v in rest)
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
    if tag in ("y", "ya"):
        raw = bytes.fromhex(rest[0])
        return raw if tag == "y" else bytearray(raw)
    if tag == "r":
        return range(*rest)
    if tag == "g":
        return iter([decode(v, refs, checker) for v in rest])
    if tag == "np":
        values = decode(rest[0], refs, checker)
        numpy = _numpy()
        return numpy.array(values) if numpy is not None else values
    if tag in numpy_data.TAGS:
        values = decode(rest[-1], refs, checker)
        numpy = _numpy()
        return numpy_data.value(numpy, tag, rest, values) if numpy is not None else values
    if tag == "h":
        if refs is not None:
            return refs[rest[0]]
        return Handle(rest[0], rest[1], checker, bool(rest[2]))
    raise ValueError(f"unknown tag {tag!r}")


def _numpy() -> Any:
    """numpy, imported here if need be, or None where the runtime has none.

    A numpy array of the program's is one in the tests too, as it would be beside the program, whatever
    this process imported before: in a series' checker, what an earlier run imported must not change
    what a value is (see ``assert_runner.Checker.decode``).
    """
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


# --- the channel between the two processes -----------------------------------------------------------
# The checker writes with marshal (the program's process reads trusted data: marshal is fast, and touches
# little of the interpreter, which in a forked process means few pages copied); the program's process writes
# JSON lines, which the checker reads with a parser that no input can make run code. Both are made once,
# when the box loads this module, never in a run.
_decode = json.JSONDecoder().decode


def _not_plain(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not plain data")


_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _not_plain, json.encoder.encode_basestring, None, ":", ",", False, False, True
)
_LENGTH = struct.Struct("<I")


class Channel:
    """A pair of pipe ends between the checker and the program's process, read straight from the descriptor.

    The checker calls :meth:`ask` and :meth:`tell`; the program's process :meth:`request` and :meth:`answer`.
    """

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = b""

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.write_fd, data) :]

    def _read(self) -> bytes:
        part = os.read(self.read_fd, 1 << 16) if self.read_fd >= 0 else b""
        if not part:
            raise EOFError
        return part

    def _fill(self) -> None:
        self.buffer += self._read()

    def tell(self, message: Any) -> None:
        """In the checker: send a message (plain data, or code) to the program's process."""
        data = marshal.dumps(message)
        self._write(_LENGTH.pack(len(data)) + data)

    def request(self) -> Any:
        """In the program's process: the checker's next message."""
        while len(self.buffer) < 4:
            self._fill()
        size = _LENGTH.unpack_from(self.buffer)[0] + 4
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[4:size], self.buffer[size:]
        return marshal.loads(data)

    def answer(self, message: Any) -> None:
        """In the program's process: send an answer (plain data only) to the checker."""
        self._write("".join(_encode(message, 0)).encode("utf-8", "surrogatepass") + b"\n")

    def ask(self, message: Any) -> Any:
        """In the checker: send a message, and read the answer (which nothing in it can make run code)."""
        self.tell(message)
        return self.receive()

    def receive(self) -> Any:
        """In the checker: the program's process's next answer."""
        end = self.buffer.find(b"\n")
        if end < 0:  # read on to the line's end, each part searched once and all joined once (a long line: linear)
            parts, at = [self.buffer], -1
            while at < 0:
                parts.append(self._read())
                at = parts[-1].find(b"\n")
            self.buffer = b"".join(parts)
            end = len(self.buffer) - len(parts[-1]) + at
        line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
        return _decode(line.decode("utf-8", "surrogatepass"))

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)
        self.read_fd = self.write_fd = -1


def update_in_place(original: Any, changed: Any) -> None:
    """An argument the program's function changed in place (a list, a dict, a set, a bytearray), changed so in the
    checker's copy too, as the tests' own object would be."""
    if original == changed:
        return
    if isinstance(original, list) and isinstance(changed, list):
        original[:] = changed
    elif (isinstance(original, dict) and isinstance(changed, dict)) or type(changed) is type(original) is set:
        original.clear()  # then filled in the changed order: an OrderedDict's move_to_end holds
        original.update(changed)
    elif isinstance(original, bytearray) and isinstance(changed, bytearray):
        original[:] = changed
