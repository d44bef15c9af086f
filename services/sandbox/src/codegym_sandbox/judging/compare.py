"""Comparing a program's output with the expected output, and a returned value with the expected one."""

from __future__ import annotations

import math

# The checker of call tests compares returned values inside the sandbox, where only the agent is: the one
# implementation lives there. The comparison modes are part of the wire models (a request names one).
from ..agent.call_test import values_match
from ..models import Comparison

__all__ = ["Comparison", "outputs_match", "values_match"]


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
