"""Function-call tests, judged by the assert runner's checker: call the function, compare what it returned.

A call test crosses to the checker as a :class:`Call` (the function's name, its arguments and the expected
value, see :func:`parse`). The checker calls the program's function as it calls it for assert tests (the
program's process runs the program, not as ``__main__``, and answers with plain data), turns the returned
value into the JSON value it stands for (:func:`json_value`) and compares it with the expected one
(:func:`values_match`) on its own side. Nothing the program prints, reads or exits with can pass a test:
the pass is the checker's. This module is the one implementation of the comparison (the server's
``judging.compare.values_match`` is this one), standard library only, as all of the agent is.

A call test compares by one of three rules, which the request names (``call_comparison`` in the wire models;
which dataset takes which is decided in the evaluator's ``tasks.rules``):

- ``json``: the JSON value of what the function returned, structurally: a bool is not a number, an integer
  is matched exactly, and only an expected float accepts a number within the tolerances;
- ``python``: Python's ``==`` between what the function returned (a tuple as a list) and the expected value,
  as the LiveCodeBench harness compares: ``True == 1``, a ``Fraction`` or a ``Decimal`` equal to the float,
  and no tolerance;
- ``apps``: ``python``, with a returned list of tuples also taken as the list of lists it stands for, as
  APPS's (and TACO's) ``testing_util`` takes it ("ground truth sequences are not tuples"). Its other
  fallback, the value against the first item of the expected list, is not followed: it passes wrong answers.

Neither ever matches through an overflow: a number too large for a float is compared exactly, and an
infinity matches only the same infinity.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal, NamedTuple

from . import value_depth
from .plain_data import MAPPINGS, decode

# A call test's text, after the program on the runner's stdin, starts with a byte no Python source may hold:
# no assert test can be taken for one.
MARK = "\0"

Rule = Literal["json", "python", "apps"]
RULES: tuple[Rule, ...] = ("json", "python", "apps")


class Call(NamedTuple):
    """One call of the program's function and the value it must return."""

    function: str
    args: list[Any]
    kwargs: dict[str, Any]
    expected: Any
    rel_tol: float
    abs_tol: float
    rule: Rule = "json"

    def judge(self, call: Callable[[str, list[Any], dict[str, Any]], Any]) -> bool:
        """Whether the function returns the expected value; ``call`` calls it and gives back the wire data of
        what it returned. The returned value goes to stdout (its JSON, or its ``repr`` under the ``python``
        rule), for the test's output to show."""
        return _compare(self, call(self.function, self.args, self.kwargs))


@value_depth.deep
def _compare(test: Call, data: Any) -> bool:
    """Whether what the function returned (its wire data) is ``test``'s expected value (see :meth:`Call.judge`)."""
    if test.rule != "json":
        value = decode(data)
        value = list(value) if isinstance(value, tuple) else value  # the harnesses' one normalisation
        if test.rule == "apps":
            value = apps_lists(value)
        print(repr(value))
        return python_match(value, test.expected)
    value = json_value(data)
    print(json.dumps(value))
    return values_match(value, test.expected, test.rel_tol, test.abs_tol)


def text(
    function: str,
    args: list[Any],
    kwargs: dict[str, Any],
    expected: Any,
    rel_tol: float,
    abs_tol: float,
    rule: Rule = "json",
) -> str:
    """A call test as the checker reads it (see :func:`parse`)."""
    if rule not in RULES:
        raise ValueError(f"a call test compares by one of {RULES}, not {rule!r}")
    spec = {
        "function": function,
        "args": args,
        "kwargs": kwargs,
        "expected": expected,
        "rel_tol": rel_tol,
        "abs_tol": abs_tol,
        "rule": rule,
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
        spec["rule"] if spec["rule"] in RULES else "json",
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
    "q": "a Fraction",
    "m": "a Decimal",
}


def json_value(data: Any) -> Any:
    """The JSON value of a returned value, from its wire data: what ``json.loads(json.dumps(value))`` gives
    in the program's process (tuples as lists, dict keys as strings), a numpy array as its list. What JSON
    cannot hold (a set, bytes, an object of the program's) is a ``TypeError``: the program's runtime error."""
    if not isinstance(data, list):
        return data
    tag, rest = data[0], data[1:]
    if tag in ("l", "t", "nt"):
        return [json_value(v) for v in (rest if tag != "nt" else rest[2:])]  # a named tuple: its values
    if tag in MAPPINGS:  # every mapping is a JSON object
        return {_key(decode(k)): json_value(v) for k, v in rest}
    if tag in ("np", "npa", "nps"):
        return json_value(rest[-1])
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
    """Structural equality of JSON values (the ``json`` rule of function-call tests).

    A bool equals only a bool; an expected integer only the same number (``2`` or ``2.0``, never ``2.0000001``);
    an expected float any number within ``rel_tol`` or ``abs_tol`` of it (see :func:`numbers_close`).
    """
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected  # True is not 1, nor 1.0
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, float):
            return numbers_close(actual, expected, rel_tol, abs_tol)
        return actual == expected  # exact, whatever the size: Python compares an int and a float exactly
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            values_match(a, e, rel_tol, abs_tol) for a, e in zip(actual, expected, strict=False)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[k], expected[k], rel_tol, abs_tol) for k in expected
        )
    return type(actual) is type(expected) and actual == expected


def numbers_close(actual: int | float, expected: int | float, rel_tol: float, abs_tol: float) -> bool:
    """Whether ``actual`` is within the tolerances of ``expected``, computed without overflow: an infinity (or
    a NaN) matches only itself, and numbers beyond a float's range are compared exactly, as fractions (never
    both rounded to infinity and called equal)."""
    if not (_finite(actual) and _finite(expected)):
        nans = isinstance(actual, float) and isinstance(expected, float) and math.isnan(actual) and math.isnan(expected)
        return nans or actual == expected
    try:
        return math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:  # an int beyond a float's range
        a, e = Fraction(actual), Fraction(expected)
        return abs(a - e) <= max(Fraction(rel_tol) * max(abs(a), abs(e)), Fraction(abs_tol))


def _finite(number: int | float) -> bool:
    return not isinstance(number, float) or math.isfinite(number)


def apps_lists(value: Any) -> Any:
    """A returned list whose first item is a tuple, with its tuples as lists, as APPS's ``testing_util`` makes it
    (``[list(x) for x in output]``); any other value as it is. Only a list of tuples and lists is made so: the
    harness's ``list(x)`` of a string or a mapping (its characters, its keys) would pass a wrong answer."""
    first_a_tuple = isinstance(value, list) and bool(value) and isinstance(value[0], tuple)
    if first_a_tuple and all(isinstance(x, (tuple, list)) for x in value):
        return [list(x) for x in value]
    return value


def python_match(actual: object, expected: object) -> bool:
    """Python's ``==`` between a returned value and the expected one (the ``python`` rule), as the reference
    harnesses compare; an exception of a comparison is a mismatch. No code of the program's runs: ``actual``
    is plain data, or a handle, which equals no plain data."""
    try:
        return bool(actual == expected)
    except Exception:
        return False
