"""Comparisons made a slice at a time (``judging.slices``) decide as the whole comparison does
(``compare.outputs_match``), wherever the slices end; so does an expected output's least size."""

from __future__ import annotations

import random

import pytest
from codegym_sandbox.judging.compare import Comparison, least_output, outputs_match
from codegym_sandbox.judging.slices import compare_sliced, least_sliced

FLOAT, WHITESPACE = Comparison.FLOAT, Comparison.WHITESPACE
LONG = "1" * 50  # longer than every slice below: its side's slices grow until it fits

CASES = [
    ("123 456", "123 456", WHITESPACE, True),  # tokens cut by a slice's end, on both sides
    ("123 456", "123 457", WHITESPACE, False),
    ("123 4567", "123 456 7", WHITESPACE, False),  # the same characters, tokens cut elsewhere
    ("12 3", "123", WHITESPACE, False),
    ("1 2 3", "1 2", WHITESPACE, False),  # counts that differ: either output with tokens left
    ("1 2", "1 2 3", WHITESPACE, False),
    ("1 2" + " " * 40 + "3", "1 2", WHITESPACE, False),  # a token left past slices of whitespace
    ("1 2" + " " * 40, "1 2", WHITESPACE, True),  # trailing whitespace, a slice of it and more
    ("\n\n  1 2 \n\t", "1 2", WHITESPACE, True),
    ("", "  \n", WHITESPACE, True),
    ("", "x", WHITESPACE, False),
    ("x", "", WHITESPACE, False),
    ("1\u20032\x1c3\u00a04", "1 2 3 4", WHITESPACE, True),  # whitespace as str.split reads it
    ("a\u00a0b", "a b", WHITESPACE, True),
    (LONG + " 2", LONG + " 2", WHITESPACE, True),
    (LONG + " 2", LONG + "2", WHITESPACE, False),
    ("0 " + LONG, "0 " + LONG + "1", WHITESPACE, False),
    ("1 1 1 1 1 1 1 1", "1.0 1.0 1.0 1.0 1.0 1.0 1.0 1.0", FLOAT, True),  # denser on one side
    ("1 1 1 1 1 1 1 1", "1.0 1.0 1.0 1.0 1.0 1.0 1.0", FLOAT, False),
    ("1.0 1.0 1.0 1.0 1.0 1.0 1.0 1.0", "1 1 1 1 1 1 1 1", FLOAT, True),
    ("0.3333334 0.3333334", "0.333333 0.333333", FLOAT, True),  # within the tolerance
    ("0.3333334 0.34", "0.333333 0.333333", FLOAT, False),
    ("1000001", "1000000", FLOAT, False),  # an expected integer is matched exactly
    ("3.0 3.00000", "3 3", FLOAT, True),
    ("1e-9 1e-9", "0.0 0", FLOAT, False),
    ("1e-9 1e-9", "0.0 0.0", FLOAT, True),
    ("12.5", "1 2.5", FLOAT, False),
    ("nan inf -inf", "nan inf -inf", FLOAT, True),
    ("x 1.0000001 y", "x 1.0 y", FLOAT, True),
    ("x 1.0000001 y", "x 1.0 z", FLOAT, False),
    (LONG + ".0 2", LONG + " 2.0", FLOAT, True),
    (LONG + ".5 2", LONG + " 2.0", FLOAT, False),
    ("1.0 2.0 \n", "1 2", FLOAT, True),
]
SIZES = [1, 2, 3, 4, 5, 7, 11, 64]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("actual", "expected", "mode", "ok"), CASES)
def test_a_sliced_comparison_decides_as_the_whole(
    actual: str, expected: str, mode: Comparison, ok: bool, size: int
) -> None:
    assert outputs_match(actual, expected, mode, rel_tol=1e-5, abs_tol=1e-6) is ok
    assert compare_sliced(actual, expected, mode, 1e-5, 1e-6, size) is ok


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("mode", [FLOAT, WHITESPACE])
@pytest.mark.parametrize("expected", sorted({e for _, e, _, _ in CASES} | {"\u0661\u0662 x\ufffd 1e5 ", "  "}))
def test_a_sliced_least_output_is_the_whole(expected: str, mode: Comparison, size: int) -> None:
    assert least_sliced(expected, mode, size) == least_output(expected, mode)


TOKENS = ["1", "1.0", "1.00", "2", "x", "1e3", "1000", "1000.0000001", "nan", "inf", "-0", "0.0", "ab" * 8, LONG]
SPACES = [" ", "\n", "\t", "  ", "\r\n", "\x1c", "\u00a0", "\u2003", "\x85"]


def _output(rng: random.Random) -> str:
    parts = [rng.choice(SPACES)] if rng.random() < 0.3 else []
    for i in range(n := rng.randint(0, 10)):
        parts.append(rng.choice(TOKENS))
        if i < n - 1 or rng.random() < 0.4:
            parts.append(rng.choice(SPACES))
    return "".join(parts)


def test_sliced_and_whole_decide_alike_on_many_outputs() -> None:
    rng = random.Random(47)
    verdicts = set()
    for _ in range(3000):
        actual = _output(rng)
        expected = rng.choice([_output(rng), actual.replace("1.0", "1"), actual.replace(" ", "\n ")])
        mode, size = rng.choice([FLOAT, WHITESPACE]), rng.randint(1, 9)
        whole = outputs_match(actual, expected, mode)
        assert compare_sliced(actual, expected, mode, 1e-6, 1e-6, size) is whole, (actual, expected, mode, size)
        assert least_sliced(expected, mode, size) == least_output(expected, mode), (expected, mode, size)
        verdicts.add(whole)
    assert verdicts == {True, False}
