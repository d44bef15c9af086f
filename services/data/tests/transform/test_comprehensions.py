"""Comprehension <-> loop: the exact rewrites, and the cases where scope or order would make them differ."""

from __future__ import annotations

import pytest
from codegym_data.transform import ComprehensionToLoop, LoopToComprehension
from rewrite_support import call, rewrite, same_program

TO_LOOP = ComprehensionToLoop()
TO_COMP = LoopToComprehension()


def test_an_assigned_comprehension_is_built_in_place() -> None:
    code = "def f(xs):\n    ys = [x * 2 for x in xs if x]\n    return ys\n"
    expected = "def f(xs):\n    ys = []\n    for x in xs:\n        if x:\n            ys.append(x * 2)\n    return ys\n"
    got = rewrite(TO_LOOP, code)
    assert same_program(got, expected), got


def test_a_returned_comprehension_with_two_clauses_gets_a_fresh_list() -> None:
    code = "def f(rows):\n    return [(r, c) for r in rows if r for c in r if c > 1]\n"
    expected = """
    def f(rows):
        acc = []
        for r in rows:
            if r:
                for c in r:
                    if c > 1:
                        acc.append((r, c))
        return acc
    """
    got = rewrite(TO_LOOP, code)
    assert same_program(got, expected), got
    assert got is not None and call(got, "f", [[1, 2], [], [3]]) == call(code, "f", [[1, 2], [], [3]])


def test_inside_try_the_list_is_assigned_only_when_complete() -> None:
    code = """
    def f(xs):
        ys = 'old'
        try:
            ys = [1 // x for x in xs]
        except ZeroDivisionError:
            pass
        return ys
    """
    got = rewrite(TO_LOOP, code)
    assert got is not None and "ys = acc" in got
    assert call(got, "f", [1, 0]) == call(code, "f", [1, 0]) == "old"


@pytest.mark.parametrize(
    "code",
    [
        # The loop variable would leak into a name the function uses.
        "def f(xs):\n    x = 5\n    ys = [x for x in xs]\n    return x, ys\n",
        # The first iterable reads a variable of the same name as the loop's (the outer one).
        "def f(x):\n    ys = [x for x in range(x)]\n    return ys\n",
        "def f(xs):\n    return [y for x in xs if (y := x)]\n",
        "ys = [x for x in range(3)]\n",  # module level
        "def f(xs):\n    return [x for x in xs], locals()\n",
        "def f(xs):\n    return sum([x for x in xs])\n",  # not assigned or returned
    ],
)
def test_comprehensions_left_alone(code: str) -> None:
    assert rewrite(TO_LOOP, code) is None


def test_an_append_loop_becomes_a_comprehension() -> None:
    code = "def f(xs):\n    out = []\n    for x in xs:\n        if x > 0:\n            out.append(x)\n    return out\n"
    expected = "def f(xs):\n    out = [x for x in xs if x > 0]\n    return out\n"
    assert same_program(rewrite(TO_COMP, code), expected)


def test_nested_append_loops_become_one_comprehension() -> None:
    code = """
    def f(g):
        cells = []
        for row in g:
            for v in row:
                if v:
                    if v % 2:
                        cells.append(v * 10)
        return cells
    """
    expected = "def f(g):\n    cells = [v * 10 for row in g for v in row if v if v % 2]\n    return cells\n"
    got = rewrite(TO_COMP, code)
    assert same_program(got, expected), got
    assert got is not None and call(got, "f", [[1, 2, 3], [5]]) == [10, 30, 50]


@pytest.mark.parametrize(
    "code",
    [
        # The list is read while it is built.
        "def f(xs):\n    out = []\n    for x in xs:\n        out.append(len(out))\n    return out\n",
        # The loop variable is read after the loop.
        "def f(xs):\n    out = []\n    for x in xs:\n        out.append(x)\n    return out, x\n",
        # Anything besides the append, an else, or a list that is not new.
        "def f(xs):\n    out = []\n    for x in xs:\n        print(x)\n        out.append(x)\n    return out\n",
        """
        def f(xs):
            out = []
            for x in xs:
                out.append(x)
            else:
                out.append(0)
            return out
        """,
        "def f(xs, out):\n    for x in xs:\n        out.append(x)\n    return out\n",
        # Inside try (a half-built list could be seen by the handler).
        """
        def f(xs):
            out = []
            try:
                out = []
                for x in xs:
                    out.append(1 // x)
            except ZeroDivisionError:
                return out
            return out
        """,
        # A condition reads a later clause's variable: the loop sees the previous iteration's value (f([[1], [2]])
        # is [1, 2]), a comprehension raises.
        """
        def f(g):
            out = []
            for a in g:
                if a[0] == 1 or b:
                    for b in a:
                        out.append(b)
            return out
        """,
        # super() needs the method's frame, which a comprehension does not have.
        """
        class A:
            def f(self, xs):
                out = []
                for x in xs:
                    out.append(super().f(x))
                return out
        """,
        # A closure reads the list.
        "def f(xs):\n    out = []\n    g = lambda: out\n    for x in xs:\n        out.append(x)\n    return g()\n",
    ],
)
def test_loops_left_alone(code: str) -> None:
    assert rewrite(TO_COMP, code) is None
