"""Function-call tests, judged by the assert runner's checker: call the function, compare what it returned.

A call test crosses to the checker as a :class:`Call` (the function's name, its arguments and the expected
value, see :func:`parse`). The checker calls the program's function as it calls it for assert tests (the
program's process runs the program, not as ``__main__``, and answers with plain data), turns the returned
value into the JSON value it stands for (:func:`json_value`) and compares it with the expected one
(:func:`values_match`) on its own side. Nothing the program prints, reads or exits with can pass a test:
the pass is the checker's. This module is the one implementation of the comparison (the server's
``judging.compare.values_match`` is this one), standard library only, as all of the agent is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .plain_data import decode

# A call test's text, after the program on the runner's stdin, starts with a byte no Python source may hold:
# no assert test can be taken for one.
MARK = "\0"


class Call(NamedTuple):
    """One call of the program's function and the value it must return."""

    function: str
    args: list[Any]
    kwargs: dict[str, Any]
    expected: Any
    rel_tol: float
    abs_tol: float

    def judge(self, call: Callable[[str, list[Any], dict[str, Any]], Any]) -> bool:
        """Whether the function returns the expected value; ``call`` calls it and gives back the wire data of
        what it returned. The returned value's JSON goes to stdout, for the test's output to show."""
        value = json_value(call(self.function, self.args, self.kwargs))
        print(json.dumps(value))
        return values_match(value, self.expected, self.rel_tol, self.abs_tol)


def text(function: str, args: list[Any], kwargs: dict[str, Any], expected: Any, rel_tol: float, abs_tol: float) -> str:
    """A call test as the checker reads it (see :func:`parse`)."""
    spec = {
        "function": function,
        "args": args,
        "kwargs": kwargs,
        "expected": expected,
        "rel_tol": rel_tol,
        "abs_tol": abs_tol,
    }
    return MARK + json.dumps(spec)


def parse(text: str) -> Call:
    """The call test in ``text`` (which starts with :data:`MARK`)."""
    spec = json.loads(text[len(MARK) :])
    return Call(
        str(spec["function"]),
        list(spec["args"]),
        dict(spec["kwargs"]),
        spec["expected"],
        float(spec["rel_tol"]),
        float(spec["abs_tol"]),
    )


_NOT_JSON = {
    "s": "a set",
    "fs": "a frozenset",
    "y": "bytes",
    "ya": "a bytearray",
    "c": "a complex number",
    "r": "a range",
    "g": "an iterator",
    "h": "an object",
}


def json_value(data: Any) -> Any:
    """The JSON value of a returned value, from its wire data: what ``json.loads(json.dumps(value))`` gives
    in the program's process (tuples as lists, dict keys as strings), a numpy array as its list. What JSON
    cannot hold (a set, bytes, an object of the program's) is a ``TypeError``: the program's runtime error."""
    if not isinstance(data, list):
        return data
    tag, rest = data[0], data[1:]
    if tag in ("l", "t"):
        return [json_value(v) for v in rest]
    if tag == "d":
        return {_key(decode(k)): json_value(v) for k, v in rest}
    if tag == "np":
        return json_value(rest[0])
    if tag in ("i", "f"):
        return decode(data)
    what = _NOT_JSON.get(tag, repr(tag))
    raise TypeError(f"the function returned {what}, which is not a JSON value" + (f": {rest[1]}" if tag == "h" else ""))


def _key(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return json.dumps(key)
    raise TypeError(f"a dict key of the returned value is not a JSON key: {key!r}")


def values_match(actual: object, expected: object, rel_tol: float = 1e-6, abs_tol: float = 1e-6) -> bool:
    """Structural equality of JSON values, with a tolerance for floats (function-call tests)."""
    if isinstance(expected, float) or isinstance(actual, float):
        if isinstance(actual, bool) or isinstance(expected, bool):
            return type(actual) is type(expected) and actual == expected  # True is not 1.0
        if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
            return math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol)
        return False
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            values_match(a, e, rel_tol, abs_tol) for a, e in zip(actual, expected, strict=False)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[k], expected[k], rel_tol, abs_tol) for k in expected
        )
    return type(actual) is type(expected) and actual == expected
