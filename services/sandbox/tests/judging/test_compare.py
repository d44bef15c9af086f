"""Output and value comparison used by the judge."""

from __future__ import annotations

import pytest
from codegym_sandbox.judging.compare import Comparison, outputs_match, values_match


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
        ("1e-9", "0", True),  # absolute tolerance
        ("x 1.0000001", "x 1", True),
        ("y 1.0", "x 1.0", False),
        ("nan", "nan", True),
        ("nan", "1.0", False),
        ("1.0 2.0", "1.0", False),
        ("abc", "1.0", False),
    ],
)
def test_float(actual: str, expected: str, ok: bool) -> None:
    assert outputs_match(actual, expected, Comparison.FLOAT, rel_tol=1e-5, abs_tol=1e-6) is ok


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
