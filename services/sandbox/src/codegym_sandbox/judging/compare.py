"""Comparing a program's output with the expected output, and a returned value with the expected one."""

from __future__ import annotations

import decimal
import math
import re

# The checker of call tests compares returned values inside the sandbox, where only the agent is: the one
# implementation lives there. The comparison modes are part of the wire models (a request names one of each);
# which a dataset's tests take is the evaluator's ``tasks.rules``.
from ..agent.call_test import python_match, values_match
from ..models import CallComparison, Comparison

__all__ = [
    "CallComparison",
    "Comparison",
    "least_output",
    "least_tokens",
    "outputs_match",
    "python_match",
    "tokens_match",
    "values_match",
]


def outputs_match(
    actual: str, expected: str, mode: Comparison = Comparison.EXACT, rel_tol: float = 1e-6, abs_tol: float = 1e-6
) -> bool:
    """Whether ``actual`` is an accepted answer for ``expected``.

    >>> outputs_match("1 2\\n", "1  2", Comparison.WHITESPACE)
    True
    >>> outputs_match("0.3333334", "0.333333", Comparison.FLOAT, rel_tol=1e-5)
    True
    >>> outputs_match("1000001", "1000000", Comparison.FLOAT)  # an integer is matched exactly
    False
    """
    if mode is Comparison.EXACT:
        return actual.rstrip("\n") == expected.rstrip("\n")
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and tokens_match(got, want, mode, rel_tol, abs_tol)


def tokens_match(got: list[str], want: list[str], mode: Comparison, rel_tol: float, abs_tol: float) -> bool:
    """Whether each of the tokens ``got`` is an accepted answer for the one of ``want`` in its place (as many of
    each), by ``whitespace`` or as numbers (``float``): the rule of :func:`outputs_match`, which the comparison
    pool applies a slice of tokens at a time (``slices``)."""
    if mode is Comparison.WHITESPACE:
        return got == want
    return all(a == b or _close(a, b, rel_tol, abs_tol) for a, b in zip(got, want, strict=True))


def least_output(expected: str, mode: Comparison = Comparison.EXACT) -> int:
    """The fewest bytes a program can print that :func:`outputs_match` accepts for ``expected`` (under ``float``, a
    bound: a number it may match by a shorter one counts one byte)."""
    if mode is Comparison.EXACT:
        return _least_bytes(expected.rstrip("\n"))
    tokens = expected.split()
    return least_tokens(tokens, mode) + max(len(tokens) - 1, 0)  # a space between each two


def least_tokens(tokens: list[str], mode: Comparison) -> int:
    """The fewest bytes that :func:`outputs_match` accepts for each of ``tokens``, together (``whitespace`` or
    ``float``: no space between them counted)."""
    numbers = mode is Comparison.FLOAT  # a number may be matched by a shorter one: one byte at least
    return sum(1 if numbers and _NUMBER.fullmatch(t) else _least_bytes(t) for t in tokens)


def _least_bytes(text: str) -> int:
    """The fewest bytes that read as ``text`` (``wire.text``): a U+FFFD is what one byte that is no UTF-8 reads as."""
    return len(text.encode("utf-8", "surrogatepass")) - 2 * text.count("\ufffd")


# A number as a program prints it: digits, a point, an exponent; or an infinity or a NaN (as float() reads them).
# ASCII digits only: float() and Decimal() read every script's digits ("١٢٣" is 123), which no checker takes.
# Each digit can be matched one way only: "[0-9]+\.?[0-9]*" split a run of digits between its two parts in every
# way, and a long run that ends in no number ("1" * 20000 + "x") took seconds, on the server's event loop.
_NUMBER = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Wide enough that no difference of two printed numbers rounds to zero; a result beyond its range is an error
# (never an infinity, which would be within any tolerance).
_EXACT = decimal.Context(
    prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation, decimal.Overflow]
)


def _close(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    """Whether the token ``a`` is an accepted answer for the expected token ``b`` as numbers: a number written
    as an integer exactly (``3.0`` is 3, ``3.0000001`` is not), one written with a point or an exponent within
    the tolerances. Read as decimals, so that no two large numbers match by both becoming infinity; an infinity
    matches only the same infinity, a NaN only a NaN."""
    if not (_NUMBER.fullmatch(a) and _NUMBER.fullmatch(b)):
        return False
    if not _INTEGER.fullmatch(b):
        decided = _float_close(float(a), float(b), rel_tol, abs_tol)
        if decided is not None:
            return decided
    try:
        x, y = decimal.Decimal(a), decimal.Decimal(b)
    except decimal.DecimalException:  # an exponent past any decimal's (1e99999999999999999999): no test expects it
        return False
    if x.is_nan() or y.is_nan():
        return x.is_nan() and y.is_nan()
    if x.is_infinite() or y.is_infinite() or _INTEGER.fullmatch(b):
        return x == y  # a comparison of decimals is exact
    exact = _EXACT
    try:
        largest = max(exact.abs(x), exact.abs(y))
        tolerance = max(exact.multiply(decimal.Decimal(rel_tol), largest), decimal.Decimal(abs_tol))
        return exact.compare(exact.abs(exact.subtract(x, y)), tolerance) <= 0
    except decimal.Overflow:  # numbers beyond any a test expects
        return False


def _float_close(x: float, y: float, rel_tol: float, abs_tol: float) -> bool | None:
    """The tolerance test in floats, where it is sure: both finite and far from a float's limits, and the
    difference not within rounding of the tolerance; None where only exact decimals can tell."""
    largest = max(abs(x), abs(y))
    if not (math.isfinite(x) and math.isfinite(y)) or largest > 1e300:
        return None
    diff, tolerance = abs(x - y), max(rel_tol * largest, abs_tol)
    if abs(diff - tolerance) <= 1e-12 * max(largest, tolerance):  # rounding could tip it either way
        return None
    return diff < tolerance
