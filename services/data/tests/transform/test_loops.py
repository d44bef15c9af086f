"""for -> while and while -> for: the exact rewrites, equal results, and the loops that must be left alone."""

from __future__ import annotations

import pytest
from codegym_data.transform import ForToWhile, WhileToFor
from rewrite_support import call, rewrite, same_program

FOR = ForToWhile()
WHILE = WhileToFor()


def test_a_range_loop_becomes_a_counting_loop() -> None:
    code = """
    def total(n):
        acc = 0
        for i in range(n):
            acc += i
        return acc
    """
    expected = """
    def total(n):
        acc = 0
        i = 0
        while i < n:
            acc += i
            i += 1
        return acc
    """
    got = rewrite(FOR, code)
    assert same_program(got, expected), got
    assert got is not None and call(got, "total", 5) == call(code, "total", 5) == 10


def test_a_bound_that_may_change_is_computed_once_and_continue_keeps_a_separate_counter() -> None:
    code = """
    def positives(xs):
        out = 0
        for i in range(len(xs)):
            if xs[i] < 0:
                continue
            out += xs[i]
        return out
    """
    expected = """
    def positives(xs):
        out = 0
        index = 0
        stop = len(xs)
        while index < stop:
            i = index
            index += 1
            if xs[i] < 0:
                continue
            out += xs[i]
        return out
    """
    got = rewrite(FOR, code)
    assert same_program(got, expected), got
    assert got is not None and call(got, "positives", [1, -2, 3]) == 4


@pytest.mark.parametrize(
    ("code", "args"),
    [
        # The variable is read after the loop: it must end at the last value, not one past it.
        ("def f(n):\n    for i in range(n):\n        pass\n    return i\n", (4,)),
        # An empty range leaves the variable as it was.
        ("def f(n):\n    i = 'before'\n    for i in range(n):\n        pass\n    return i\n", (0,)),
        # Closures see the variable's last value.
        (
            """
            def f(n):
                fs = []
                for i in range(n):
                    fs.append(lambda: i)
                return [g() for g in fs]
            """,
            (3,),
        ),
        # Counting down, with a break and an else.
        (
            "def f(n):\n    seen = []\n    for k in range(9, n, -2):\n        if k == 3:\n            break\n"
            "        seen.append(k)\n    else:\n        seen.append('done')\n    return seen\n",
            (0,),
        ),
        (
            "def f(n):\n    seen = []\n    for k in range(10, n, -2):\n        seen.append(k)\n    else:\n"
            "        seen.append('done')\n    return seen\n",
            (1,),
        ),
        # The body reassigns the loop variable: the next iteration still takes the range's next value.
        (
            "def f(n):\n    out = []\n    for i in range(n):\n        i *= 10\n        out.append(i)\n    return out\n",
            (3,),
        ),
    ],
)
def test_range_loops_compute_the_same(code: str, args: tuple[int]) -> None:
    got = rewrite(FOR, code)
    assert got is not None and "while" in got and "for " not in got.replace("for g in fs", ""), got
    assert call(got, "f", *args) == call(code, "f", *args)


def test_other_loops_walk_their_iterator() -> None:
    code = """
    def pairs(d):
        out = []
        for k, v in d.items():
            out.append(k * v)
        return out
    """
    expected = """
    def pairs(d):
        out = []
        iterator = iter(d.items())
        while True:
            try:
                k, v = next(iterator)
            except StopIteration:
                break
            out.append(k * v)
        return out
    """
    got = rewrite(FOR, code)
    assert same_program(got, expected), got
    assert got is not None and call(got, "pairs", {"a": 2, "b": 1}) == ["aa", "b"]


def test_nested_loops_get_distinct_counters() -> None:
    code = "def f(xs):\n    n = 0\n    for a in xs:\n        for b in xs:\n            n += a * b\n    return n\n"
    got = rewrite(FOR, code)
    assert got is not None and got.count("iter(") == 2 and "iterator_1" in got
    assert call(got, "f", [1, 2, 3]) == 36


@pytest.mark.parametrize(
    "code",
    [
        # An iterator loop with an else: the else would run inside the StopIteration handler.
        "def f(xs):\n    for x in xs:\n        pass\n    else:\n        return 1\n",
        # A class body: new names would become class attributes.
        "class A:\n    for k in range(3):\n        pass\n",
        "async def f(xs):\n    async for x in xs:\n        pass\n",
        "def f():\n    return 1\n",
        # A new counter would show in locals().
        "def f(xs):\n    for x in xs:\n        pass\n    return sorted(locals())\n",
    ],
)
def test_for_loops_left_alone(code: str) -> None:
    assert rewrite(FOR, code) is None


def test_a_program_that_rebinds_range_gets_the_iterator_form() -> None:
    code = (
        "range = lambda n: [7]\ndef f():\n    out = []\n    for i in range(3):\n        out.append(i)\n    return out\n"
    )
    got = rewrite(FOR, code)
    assert got is not None and "iter(range(3))" in got
    assert call(got, "f") == [7]


def test_a_counting_while_loop_becomes_a_range_loop() -> None:
    code = """
    def best(xs: list) -> int:
        top = 0
        i = 0
        while i < len(xs):
            if xs[i] > top:
                top = xs[i]
            i += 1
        return top
    """
    expected = """
    def best(xs: list) -> int:
        top = 0
        for i in range(len(xs)):
            if xs[i] > top:
                top = xs[i]
        return top
    """
    got = rewrite(WHILE, code)
    assert same_program(got, expected), got


def test_inclusive_and_downward_counting_loops() -> None:
    up = "def f(n: int):\n    s = 0\n    i = 1\n    while i <= n:\n        s += i\n        i += 1\n    return s\n"
    assert same_program(
        rewrite(WHILE, up), "def f(n: int):\n    s = 0\n    for i in range(1, n + 1):\n        s += i\n    return s\n"
    )
    down = "def f():\n    s = []\n    i = 10\n    while i > 0:\n        s.append(i)\n        i -= 3\n    return s\n"
    got = rewrite(WHILE, down)
    assert same_program(
        got, "def f():\n    s = []\n    for i in range(10, 0, -3):\n        s.append(i)\n    return s\n"
    )
    assert got is not None and call(got, "f") == call(down, "f") == [10, 7, 4, 1]


@pytest.mark.parametrize(
    "code",
    [
        # i is read after the loop (a for loop would leave it one step short).
        "def f(n: int):\n    i = 0\n    while i < n:\n        i += 1\n    return i\n",
        # continue would skip the increment in the while loop, not in the for loop.
        "def f(n: int):\n    i = 0\n    while i < n:\n        if i == 2:\n            continue\n        i += 1\n",
        # The body changes the list whose length bounds the loop.
        "def f(xs: list):\n    i = 0\n    while i < len(xs):\n        xs.append(i)\n        i += 1\n",
        # A call that may do anything, with a bound that reads state.
        "def f(xs: list):\n    i = 0\n    while i < len(xs):\n        print(xs[i])\n        i += 1\n",
        # The bound's type is unknown (a float bound would make range() raise).
        "def f(n):\n    i = 0\n    while i < n:\n        i += 1\n",
        "def f(n: int):\n    i = 0.5\n    while i < n:\n        i += 1\n",
        # The increment is not the last statement, or the body also assigns i.
        "def f(n: int):\n    s = 0\n    i = 0\n    while i < n:\n        i += 1\n        s += i\n    return s\n",
        "def f(n: int):\n    i = 0\n    while i < n:\n        i = i * 2\n        i += 1\n",
        # The bound is reassigned in the body.
        "def f(n: int):\n    i = 0\n    while i < n:\n        n = n - 1\n        i += 1\n",
        # Counting the wrong way for the comparison.
        "def f(n: int):\n    i = 0\n    while i < n:\n        i -= 1\n",
        # Module level: i would be a global others can read.
        "n = 3\ni = 0\nwhile i < n:\n    i += 1\n",
        # A closure sees i.
        """
        def f(n: int):
            fs = []
            i = 0
            while i < n:
                fs.append(lambda: i)
                i += 1
            return fs
        """,
    ],
)
def test_while_loops_left_alone(code: str) -> None:
    assert rewrite(WHILE, code) is None
