"""Reordering: independent pure assignments swap; dependent ones, effects, and guarded code stay in order."""

from __future__ import annotations

import pytest
from codegym_data.transform import ReorderStatements
from rewrite_support import call, rewrite, same_program

REORDER = ReorderStatements()


def test_two_independent_assignments_swap() -> None:
    code = "def f(xs):\n    n = len(xs)\n    s = sorted(xs)\n    return n, s\n"
    assert same_program(rewrite(REORDER, code), "def f(xs):\n    s = sorted(xs)\n    n = len(xs)\n    return n, s\n")


def test_a_key_function_may_be_a_lambda_or_a_builtin() -> None:
    for key in ("lambda v: -v", "abs"):
        got = rewrite(REORDER, f"def f(xs):\n    a = sorted(xs, key={key})\n    b = 2\n    return a, b\n")
        assert got is not None and got.index("b = 2") < got.index("a = sorted"), got


def test_a_pure_function_of_the_program_may_be_called() -> None:
    code = "def sq(v):\n    r = v * v\n    return r\n\ndef f(a):\n    x = sq(a)\n    y = a + 1\n    return x, y\n"
    got = rewrite(REORDER, code)
    assert got is not None and got.index("y = a + 1") < got.index("x = sq(a)")
    assert call(got, "f", 3) == (9, 4)


def test_swaps_vary_with_the_seed_and_keep_results() -> None:
    code = "def f(a, b):\n    p = a + 1\n    q = b + 2\n    r = a * b\n    s = b - a\n    return p, q, r, s\n"
    outs = {rewrite(REORDER, code, seed=s) for s in range(20)}
    assert len(outs) > 2
    for out in outs:
        assert out is not None and call(out, "f", 2, 5) == (3, 7, 10, 3)


@pytest.mark.parametrize(
    "code",
    [
        "def f():\n    a = 1\n    b = a + 1\n    return b\n",  # b reads a
        "def f():\n    a = 1\n    a = 2\n    return a\n",  # both bind a
        "def f(g):\n    a = g()\n    b = 2\n    return a, b\n",  # g may do anything
        "def f(xs, g):\n    a = sorted(xs, key=g)\n    b = 2\n    return a, b\n",  # and sorted calls it
        "def f(xs):\n    a = xs.pop()\n    b = len(xs)\n    return a, b\n",  # pop changes xs
        "def f(xs):\n    xs[0] = 1\n    b = xs[0]\n    return b\n",  # a store into an object
        "def f(xs, ys):\n    xs += [1]\n    n = len(ys)\n    return n\n",  # += may change a shared list
        # add() changes its argument: `xs or []` is xs itself when xs is not empty
        """
        def add(xs):
            acc = xs or []
            acc += [1]
            return acc

        def f(ys):
            a = add(ys)
            n = len(ys)
            return a, n
        """,
        "def f():\n    try:\n        a = 1 // 0\n        b = 2\n    except ZeroDivisionError:\n        return b\n",
        "class A:\n    x = 1\n    y = 2\n",  # the order of a class's attributes
        # a function of the program reads a global the other statement binds (itself, or through another)
        "def g():\n    return limit\n\nvalue = g()\nlimit = 3\n",
        "def h():\n    return limit\n\ndef g():\n    return h()\n\nvalue = g()\nlimit = 3\n",
    ],
)
def test_statements_left_in_order(code: str) -> None:
    assert rewrite(REORDER, code) is None
