"""Output and value comparison used by the judge."""

from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction

import pytest
from codegym_sandbox.judging.compare import Comparison, least_output, outputs_match, python_match, values_match


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        ("3\n", "3", True),
        ("3", "3\n\n", True),
        ("3 \n", "3", False),  # exact: only trailing newlines are forgiven
        ("1  2\n", "1 2", False),
        ("", "", True),
        ("a\nb\n", "a\nb", True),
        ("a\nb", "a\nc", False),
    ],
)
def test_exact(actual: str, expected: str, ok: bool) -> None:
    assert outputs_match(actual, expected, Comparison.EXACT) is ok


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [("1  2\n", "1 2", True), ("1\n2\t\n", "1 2", True), ("1 2 3", "1 2", False), ("12", "1 2", False)],
)
def test_whitespace(actual: str, expected: str, ok: bool) -> None:
    assert outputs_match(actual, expected, Comparison.WHITESPACE) is ok


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        ("0.3333334", "0.333333", True),
        ("0.34", "0.333333", False),
        ("1e-9", "0.0", True),  # absolute tolerance
        ("1e-9", "0", False),  # an expected integer is matched exactly...
        ("3.0", "3", True),  # ...as a number
        ("1000001", "1000000", False),
        ("2.0000001", "2", False),
        ("2.0000001", "2.0", True),
        ("x 1.0000001", "x 1.0", True),
        ("y 1.0", "x 1.0", False),
        ("nan", "nan", True),
        ("nan", "1.0", False),
        ("1.0 2.0", "1.0", False),
        ("abc", "1.0", False),
    ],
)
def test_float(actual: str, expected: str, ok: bool) -> None:
    assert outputs_match(actual, expected, Comparison.FLOAT, rel_tol=1e-5, abs_tol=1e-6) is ok


HUGE = "1" + "0" * 400


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (HUGE, "2" + "0" * 400),  # both beyond a float's range: once both infinity, and equal
        ("1e400", "2e400"),
        ("1e400", "inf"),
        ("-1e400", "-inf"),
        ("inf", "1e308"),
        ("-inf", "inf"),
        ("1e999999999999999999", "1.5"),  # a product beyond any exponent: an overflow, never a match
        ("1.5", "1e999999999999999999"),
        (HUGE + "1", HUGE),
        ("1e9999999999999999999999999", "1.5"),  # past any decimal's exponent: no number, and no error either
        ("-1e-9999999999999999999999999", "1"),
        ("1.5", "1e9999999999999999999999999"),
        ("\u0661\u0662\u0663", "123"),  # digits of another script: float() reads them, no checker does
        ("123", "\u0661\u0662\u0663"),
    ],
)
def test_float_never_matches_by_overflow(actual: str, expected: str) -> None:
    assert not outputs_match(actual, expected, Comparison.FLOAT, rel_tol=1e-5, abs_tol=1e-6)
    assert not outputs_match(actual, expected, Comparison.FLOAT, rel_tol=0.1, abs_tol=1.0)


def test_float_matches_large_numbers_within_the_tolerance() -> None:
    assert outputs_match("1.0000001e400", "1e400", Comparison.FLOAT, rel_tol=1e-6)
    assert outputs_match(HUGE, HUGE, Comparison.FLOAT)
    assert outputs_match("inf -inf nan", "inf -inf nan", Comparison.FLOAT)
    assert outputs_match("Infinity", "inf", Comparison.FLOAT)


def test_float_tolerance_is_configurable() -> None:
    assert not outputs_match("1.01", "1.0", Comparison.FLOAT, rel_tol=1e-6, abs_tol=1e-6)
    assert outputs_match("1.01", "1.0", Comparison.FLOAT, rel_tol=0.05, abs_tol=0)


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        ([3, 6.0], [3, 6.0], True),
        ([3, 6.0000000001], [3, 6.0], True),
        ([3, 6.1], [3, 6.0], False),
        (1, 1.0, True),
        (2.0, 2, True),  # an expected integer: the same number...
        (2.0000000001, 2, False),  # ...exactly, never within a tolerance
        (10**30 + 1, 10**30, False),
        (True, 1, False),  # bool is not an int here
        (True, 1.0, False),
        (1, True, False),
        ("1", 1, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1, 2], "b": 0}, {"a": [1, 2]}, False),
        ([1, 2], [1, 2, 3], False),
        (None, None, True),
        (None, 0, False),
        ([1], (1,), False),
    ],
)
def test_values_match(actual: object, expected: object, ok: bool) -> None:
    assert values_match(actual, expected) is ok


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        (10**400, 10**400 + 1, False),  # ints compare as ints, whatever their size
        (10**400, 10**400, True),
        (10**400, 1e308, False),  # an int beyond a float's range: compared exactly, never an overflow
        ([10**400], [1.0], False),
        (10**400, float("inf"), False),  # an infinity matches only itself
        (float("inf"), float("inf"), True),
        (float("-inf"), float("inf"), False),
        (1e308, float("inf"), False),
        (float("inf"), 1e308, False),
        (float("nan"), float("nan"), True),
        (float("nan"), 1.0, False),
        (int(1e300) + 1, 1e300, True),  # within the tolerance of an expected float
    ],
)
def test_values_never_match_by_overflow(actual: object, expected: object, ok: bool) -> None:
    assert values_match(actual, expected) is ok


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        (True, 1, True),  # Python's ==, as the APPS and LiveCodeBench harnesses compare
        (1, True, True),
        (2.0, 2, True),
        (Fraction(1, 2), 0.5, True),
        (Decimal("0.5"), 0.5, True),
        (Fraction(1, 3), 0.3333333333, False),  # no tolerance there
        (0.1 + 0.2, 0.3, False),
        ([1, [2, 3]], [1, [2, 3]], True),
        ((1, 2), [1, 2], False),  # the checker makes the returned tuple a list, not this
        ({"a": 1}, {"a": True}, True),
        ({1: 2}, {"1": 2}, False),
        (10**400, float("inf"), False),
        ("1", 1, False),
        (None, None, True),
    ],
)
def test_python_match(actual: object, expected: object, ok: bool) -> None:
    assert python_match(actual, expected) is ok


def test_python_match_takes_an_error_of_a_comparison_for_a_mismatch() -> None:
    assert python_match(Decimal("sNaN"), 0.5) is False


def test_a_long_token_is_judged_in_linear_time() -> None:
    """A run of digits that ends in no number was matched in quadratic time, on the server's event loop: 20,000
    digits froze every client for 22 s, and a run may print 8 MiB."""
    began = time.process_time()
    assert not outputs_match("1" * 400_000 + "x", "1.5", Comparison.FLOAT)
    assert not outputs_match("1" * 200_000 + "." + "1" * 200_000 + "e", "1.5", Comparison.FLOAT)
    assert time.process_time() - began < 2.0  # quadratic: hours; linear: milliseconds on any machine


@pytest.mark.parametrize(
    ("expected", "mode", "least"),
    [
        ("1 2\n\n", Comparison.EXACT, 3),
        ("1   2\n", Comparison.WHITESPACE, 3),
        ("0.3333333 word\n", Comparison.FLOAT, 6),  # a number may be matched by "0.3": one byte at least
        ("\u00e9\ufffd", Comparison.EXACT, 3),  # one byte that is no UTF-8 reads as U+FFFD
        ("", Comparison.WHITESPACE, 0),
    ],
)
def test_least_output_is_the_fewest_bytes_that_match(expected: str, mode: Comparison, least: int) -> None:
    assert least_output(expected, mode) == least
