"""if/else inversion: the exact rewrite, exact negations, elif chains, and ifs without else left alone."""

from __future__ import annotations

import itertools

import pytest
from codegym_data.transform import InvertIf
from rewrite_support import call, rewrite, same_program

INVERT = InvertIf()


def test_the_condition_is_negated_and_the_branches_swapped() -> None:
    code = "def f(x):\n    if x > 0:\n        return 'pos'\n    else:\n        return 'other'\n"
    expected = "def f(x):\n    if not x > 0:\n        return 'other'\n    else:\n        return 'pos'\n"
    assert same_program(rewrite(INVERT, code), expected)


@pytest.mark.parametrize(
    ("test", "negated"),
    [
        ("x is None", "x is not None"),
        ("x is not None", "x is None"),
        ("x in d", "x not in d"),
        ("x not in d", "x in d"),
        ("not x", "x"),
        ("a < b < c", "not a < b < c"),  # a chain is not one comparison
        ("x == 1 or y", "not (x == 1 or y)"),
    ],
)
def test_negations_are_exact(test: str, negated: str) -> None:
    got = rewrite(INVERT, f"if {test}:\n    a()\nelse:\n    b()\n")
    assert same_program(got, f"if {negated}:\n    b()\nelse:\n    a()\n"), got


def test_elif_chains_and_conditional_expressions_compute_the_same() -> None:
    code = """
    def grade(x, y):
        if x > 2:
            r = 'a'
        elif x > 1:
            r = 'b' if y else 'c'
        elif x is None:
            r = 'none'
        else:
            r = 'd'
        return r
    """
    got = rewrite(INVERT, code)
    assert got is not None and got.count("not ") >= 3 and "elif" not in got
    for x, y in itertools.product([3, 2, 1, None], [True, False]):
        if x is None:
            continue
        assert call(got, "grade", x, y) == call(code, "grade", x, y)


def test_an_if_without_else_is_left_alone() -> None:
    assert rewrite(INVERT, "def f(x):\n    if x:\n        return 1\n    return 2\n") is None
