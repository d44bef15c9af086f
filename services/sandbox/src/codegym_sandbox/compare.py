"""Comparing a program's output with the expected output."""

from __future__ import annotations

import math
from enum import Enum


class Comparison(str, Enum):
    EXACT = "exact"  # byte for byte, apart from trailing newlines (as verl compares)
    WHITESPACE = "whitespace"  # the same tokens, however spaced
    FLOAT = "float"  # tokens equal, numbers within a tolerance


def outputs_match(
    actual: str, expected: str, mode: Comparison = Comparison.EXACT, rel_tol: float = 1e-6, abs_tol: float = 1e-6
) -> bool:
    """Whether ``actual`` is an accepted answer for ``expected``.

    >>> outputs_match("1 2\\n", "1  2", Comparison.WHITESPACE)
    True
    >>> outputs_match("0.3333334", "0.333333", Comparison.FLOAT, rel_tol=1e-5)
    True
    """
    if mode is Comparison.EXACT:
        return actual.rstrip("\n") == expected.rstrip("\n")
    got, want = actual.split(), expected.split()
    if mode is Comparison.WHITESPACE:
        return got == want
    if len(got) != len(want):
        return False
    return all(a == b or _close(a, b, rel_tol, abs_tol) for a, b in zip(got, want, strict=False))


def _close(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)


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
