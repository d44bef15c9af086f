"""Values that cross between the tests' process and the program's (``agent/plain_data.py``): what a test sees of
a result, or of an argument the program changed, must be what it would see beside the program (real pytest on
``from solution import *`` and the tests fails the wrong program of each case here, and passes the right one)."""

from __future__ import annotations

import textwrap

import pytest
from fastapi.testclient import TestClient

from .test_test_forms import _verdicts

# An iterator class of the program's, as it is asked to be.
COUNTDOWN = (
    "class Countdown:\n    def __init__(self, n):\n        self.n = n\n    def __iter__(self):\n        return self\n"
    "    def __next__(self):\n        if self.n <= 0:\n            raise StopIteration\n        self.n -= 1\n"
    "        return self.n + 1\n"
)

# tests, a wrong program, a right one
CASES = {
    # numpy's values keep their dtype, their shape and their type.
    "a float32 array where float64 is asked": (
        """
        import numpy as np
        def test_norm():
            r = norm([1, 1, 2])
            assert r.dtype == np.float64 and r.tolist() == [0.25, 0.25, 0.5]
        """,
        "import numpy as np\ndef norm(a):\n    a = np.asarray(a, dtype=np.float32)\n    return a / a.sum()\n",
        "import numpy as np\ndef norm(a):\n    a = np.asarray(a, dtype=np.float64)\n    return a / a.sum()\n",
    ),
    "an int32 array where int64 is asked": (
        """
        import numpy as np
        def test_ids():
            assert ids(3).dtype == np.int64
        """,
        "import numpy as np\ndef ids(n):\n    return np.arange(n, dtype=np.int32)\n",
        "import numpy as np\ndef ids(n):\n    return np.arange(n, dtype=np.int64)\n",
    ),
    "an np.int64 where an int is asked": (
        """
        def test_count():
            assert isinstance(count([1, 2]), int) and count([1, 2]) == 2
        """,
        "import numpy as np\ndef count(a):\n    return np.int64(len(a))\n",
        "def count(a):\n    return len(a)\n",
    ),
    "an array where a scalar is asked": (
        """
        import numpy as np
        def test_total():
            t = total(np.arange(3).tolist())
            assert t == 3 and np.ndim(t) == 0
        """,
        "import numpy as np\ndef total(a):\n    return np.array([sum(a)])\n",
        "import numpy as np\ndef total(a):\n    return np.int64(sum(a))\n",
    ),
    "an empty array's shape": (
        """
        def test_empty():
            assert empty(3).shape == (0, 3)
        """,
        "import numpy as np\ndef empty(n):\n    return np.zeros((n, 0))\n",
        "import numpy as np\ndef empty(n):\n    return np.zeros((0, n))\n",
    ),
    "a bool array": (
        """
        import numpy as np
        def test_mask():
            m = positive([1, -1, 2])
            assert m.dtype == np.bool_ and m.tolist() == [True, False, True]
        """,
        "import numpy as np\ndef positive(a):\n    return (np.asarray(a) > 0).astype(np.int8)\n",
        "import numpy as np\ndef positive(a):\n    return np.asarray(a) > 0\n",
    ),
    # An argument given by name and changed in place is changed for the tests too, as one given by place is.
    "a keyword argument sorted in place": (
        """
        def test_no_mutation():
            a = [3, 1, 2]
            assert sorted_copy(arr=a) == [1, 2, 3]
            assert a == [3, 1, 2]
        """,
        "def sorted_copy(arr):\n    arr.sort()\n    return arr\n",
        "def sorted_copy(arr):\n    return sorted(arr)\n",
    ),
    "a keyword argument that must change": (
        """
        def test_fill():
            d = {}
            fill(into=d, n=2)
            assert d == {0: 0, 1: 1}
        """,
        "def fill(into, n):\n    into = {i: i for i in range(n)}\n",
        "def fill(into, n):\n    into.update({i: i for i in range(n)})\n",
    ),
    # The tests' own arrays reach the program as arrays, and what a call does to one in place, the tests see.
    "an array the tests pass": (
        """
        import numpy as np
        def test_total():
            assert total(np.array([1, 2, 3], dtype=np.int8)) == 6
        """,
        "def total(a):\n    return len(a)\n",
        "def total(a):\n    assert a.dtype.name == 'int8'\n    return int(a.sum())\n",
    ),
    "an array sorted in place": (
        """
        import numpy as np
        def test_sort():
            a = np.array([3, 1, 2])
            view = a[:2]
            sort_in_place(a)
            assert a.tolist() == [1, 2, 3] and view.tolist() == [1, 2]
        """,
        "import numpy as np\ndef sort_in_place(a):\n    a = np.sort(a)\n",
        "def sort_in_place(a):\n    a.sort()\n",
    ),
    "an array that must not change": (
        """
        import numpy as np
        def test_copy():
            a = np.array([3.0, 1.0, 2.0])
            assert sorted_copy(a).tolist() == [1.0, 2.0, 3.0]
            assert a.tolist() == [3.0, 1.0, 2.0]
        """,
        "def sorted_copy(a):\n    a.sort()\n    return a\n",
        "import numpy as np\ndef sorted_copy(a):\n    return np.sort(a)\n",
    ),
    "an array given back as it is": (
        """
        import numpy as np
        def test_same():
            a = np.zeros(3)
            assert fill(a) is a and a.tolist() == [1.0, 1.0, 1.0]
        """,
        "import numpy as np\ndef fill(a):\n    return np.ones_like(a)\n",
        "def fill(a):\n    a[:] = 1\n    return a\n",
    ),
    # What a call changed before it raised, the tests see (a withdrawal that fails must leave the account as it was).
    "a change made before an error": (
        """
        def test_atomic():
            acct = {"balance": 100}
            try:
                withdraw(acct, 1000)
                raise AssertionError("no error")
            except ValueError:
                pass
            assert acct == {"balance": 100}
        """,
        "def withdraw(a, n):\n    a['balance'] -= n\n    if a['balance'] < 0:\n        raise ValueError(n)\n",
        "def withdraw(a, n):\n    if a['balance'] < n:\n        raise ValueError(n)\n    a['balance'] -= n\n",
    ),
    "what was done before an error": (
        """
        def test_partial():
            out = []
            try:
                collect(out, [1, 2, "x"])
            except ValueError:
                pass
            assert out == [1, 2]
        """,
        "def collect(out, xs):\n    if not all(isinstance(x, int) for x in xs):\n        raise ValueError(xs)\n",
        "def collect(out, xs):\n    for x in xs:\n        if not isinstance(x, int):\n            raise ValueError(x)\n"
        "        out.append(x)\n",
    ),
    # An object of the program's is one object in the tests however often it crosses.
    "a node that must be copied": (
        """
        def test_clone():
            head = Node(1)
            copy = clone(head)
            assert copy is not head and copy.val == 1
        """,
        "class Node:\n    def __init__(self, val):\n        self.val = val\ndef clone(n):\n    return n\n",
        "class Node:\n    def __init__(self, val):\n        self.val = val\ndef clone(n):\n    return Node(n.val)\n",
    ),
    "nodes the call marks as seen": (
        """
        def test_visit():
            a, b = Node(1), Node(2)
            a.next = b
            seen = set()
            visit(a, seen)
            assert a in seen and b in seen and walk(a)[-1] is b
        """,
        "class Node:\n    def __init__(self, val):\n        self.val, self.next = val, None\n"
        "def visit(n, seen):\n    seen.add(n)\ndef walk(n):\n    return [n]\n",
        "class Node:\n    def __init__(self, val):\n        self.val, self.next = val, None\n"
        "def visit(n, seen):\n    while n:\n        seen.add(n)\n        n = n.next\n"
        "def walk(n):\n    out = []\n    while n:\n        out.append(n)\n        n = n.next\n    return out\n",
    ),
    # An iterator of the program's is one to the tests: next() gives its items, and its StopIteration its end.
    "an iterator that must end": (
        """
        import pytest
        def test_countdown():
            it = Countdown(2)
            assert next(it) == 2 and next(it) == 1
            with pytest.raises(StopIteration):
                next(it)
        """,
        "class Countdown:\n    def __init__(self, n):\n        self.n = n + 1\n    def __iter__(self):\n"
        "        return self\n    def __next__(self):\n        self.n -= 1\n        return self.n\n",
        "class Countdown:\n    def __init__(self, n):\n        self.n = n\n    def __iter__(self):\n"
        "        return self\n    def __next__(self):\n        if self.n <= 0:\n            raise StopIteration\n"
        "        self.n -= 1\n        return self.n + 1\n",
    ),
    # An object of the program's as it is now: its repr, and the classes it is an instance of.
    "the repr of an object since changed": (
        """
        def test_repr():
            s = Stack()
            s.push(1)
            assert repr(s) == "Stack([1])" and f"{s!r}" == "Stack([1])"
        """,
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items = self.items + [x] * 2\n    def __repr__(self):\n        return f'Stack({self.items})'\n",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items.append(x)\n    def __repr__(self):\n        return f'Stack({self.items})'\n",
    ),
    "an instance of the program's class": (
        """
        def test_made():
            assert isinstance(make(), Stack) and isinstance(make(), (int, Stack)) and not isinstance([], Stack)
            assert issubclass(Stack, Stack)
        """,
        "class Stack:\n    pass\nclass Queue:\n    pass\ndef make():\n    return Queue()\n",
        "class Stack:\n    pass\ndef make():\n    return Stack()\n",
    ),
    # What the tests do with objects of the program's as with their own: dict keys by the program's hash, slices,
    # a class's name, and a context manager (whose exit never ends the block: the tests see what it raised).
    "equal objects as one key": (
        """
        def test_key():
            assert {Point(1, 2): "a"}[Point(1, 2)] == "a" and len({Point(1, 2), Point(1, 2)}) == 1
            assert Point.__name__ == "Point" and Point(1, 2)[0:1] == [1]
        """,
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n    def __hash__(self):\n"
        "        return hash(self.x)\n    def __getitem__(self, i):\n        return [self.y, self.x][i]\n",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n    def __hash__(self):\n"
        "        return hash((self.x, self.y))\n    def __getitem__(self, i):\n        return [self.x, self.y][i]\n",
    ),
    "a context manager of the program's": (
        """
        def test_timer():
            t = Timer()
            with t as u:
                assert u.entered and not t.exited
            assert t.exited
        """,
        "class Timer:\n    def __init__(self):\n        self.entered = self.exited = False\n    def __enter__(self):\n"
        "        self.entered = True\n        return self\n    def __exit__(self, *exc):\n        return True\n",
        "class Timer:\n    def __init__(self):\n        self.entered = self.exited = False\n    def __enter__(self):\n"
        "        self.entered = True\n        return self\n    def __exit__(self, *exc):\n        self.exited = True\n",
    ),
    "objects that differ by the program's !=": (
        """
        def test_differ():
            assert Point(1, 2) != Point(1, 3) and not (Point(1, 2) != Point(1, 2))
        """,
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n    def __ne__(self, o):\n"
        "        return True\n",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n",
    ),
    # A list the tests keep in a numpy array of objects is theirs: the program changes it in place, or not.
    "a list in an array of objects": (
        """
        import numpy as np
        def test_pure():
            inner = [3, 1, 2]
            a = np.empty(2, dtype=object)
            a[0], a[1] = inner, [5]
            assert first_sorted(a) == [1, 2, 3] and inner == [3, 1, 2]
            add_one(a)
            assert inner == [3, 1, 2, 2] and a[0] is inner
        """,
        "def first_sorted(a):\n    a[0].sort()\n    return a[0]\ndef add_one(a):\n    a[0].append(2)\n",
        "def first_sorted(a):\n    return sorted(a[0])\ndef add_one(a):\n    a[0].append(2)\n",
    ),
    # A result that raised as it was written (a generator) sends back what the call changed before, no more.
    "a generator that raises after a change": (
        """
        def test_partial():
            acc = []
            try:
                list(rows(acc))
            except ValueError:
                pass
            assert acc == [[1]]
        """,
        "def rows(acc):\n    def g():\n        yield [1]\n        raise ValueError('done')\n    return g()\n",
        "def rows(acc):\n    def g():\n        row = [1]\n        acc.append(row)\n        yield row\n"
        "        raise ValueError('done')\n    return g()\n",
    ),
    # The class of an object of the program's is its own to the tests: two of one class are of one type, and it
    # has the protocols its class has (an iterator is one, an iterator without a length is no Sized).
    "an object of another class": (
        """
        def test_add_keeps_type():
            a, b = Vec(1, 2), Vec(3, 4)
            c = a + b
            assert type(c) is type(a) and type(c).__name__ == "Vec" and c.x == 4
        """,
        "class P:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\nclass Vec(P):\n"
        "    def __add__(self, o):\n        return P(self.x + o.x, self.y + o.y)\n",
        "class Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __add__(self, o):\n        return Vec(self.x + o.x, self.y + o.y)\n",
    ),
    "an iterator by its protocols": (
        """
        from collections.abc import Iterator, Sized
        from itertools import islice
        def test_protocol():
            r = Countdown(3)
            assert isinstance(r, Iterator) and not isinstance(r, Sized) and iter(r) is r
            assert list(islice(r, 2)) == [3, 2] and next(r) == 1
        """,
        "class Countdown:\n    def __init__(self, n):\n        self.n = n\n    def __iter__(self):\n"
        "        return iter(range(self.n, 0, -1))\n",
        COUNTDOWN,
    ),
    "an iterator stepped in part": (
        """
        def test_partial():
            it = Countdown(5)
            for x in it:
                if x == 3:
                    break
            assert next(it) == 2 and list(zip(it, it)) == []
            it = Countdown(4)
            assert list(zip(it, it)) == [(4, 3), (2, 1)]
        """,
        "class Countdown:\n    def __init__(self, n):\n        self.n = n\n    def __iter__(self):\n"
        "        return self\n    def __next__(self):\n        self.n -= 1\n        if self.n < 0:\n"
        "            raise StopIteration\n        return self.n\n",
        COUNTDOWN,
    ),
    # A class of the program's called by the tests through an object's type makes another object there.
    "a new object of an object's class": (
        """
        def test_add():
            a, b = Vec(1, 2), Vec(3, 4)
            assert a + b == type(a)(4, 6) and type(type(a)(0, 0)) is type(a) and type(a).__module__ == "solution"
        """,
        "class Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __add__(self, o):\n"
        "        return Vec(0, 0)\n    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n",
        "class Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __add__(self, o):\n"
        "        return Vec(self.x + o.x, self.y + o.y)\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n",
    ),
    "a container the tests search, reverse and step": (
        """
        from itertools import islice
        def test_bag():
            b = Bag([1, 2, 3])
            assert 2 in b and 5 not in b and list(reversed(b)) == [3, 2, 1]
            assert list(islice(Fib(), 6)) == [0, 1, 1, 2, 3, 5]
        """,
        "class Bag:\n    def __init__(self, items):\n        self.items = list(items)\n    def __iter__(self):\n"
        "        return iter(self.items)\n    def __contains__(self, x):\n        return True\n"
        "    def __reversed__(self):\n        return iter(self.items[::-1])\n"
        "class Fib:\n    def __iter__(self):\n        return iter([0, 1, 1, 2, 3, 5])\n",
        "class Bag:\n    def __init__(self, items):\n        self.items = list(items)\n    def __iter__(self):\n"
        "        return iter(self.items)\n    def __reversed__(self):\n        return iter(self.items[::-1])\n"
        "class Steps:\n    def __init__(self):\n        self.a, self.b = 0, 1\n"
        "    def __iter__(self):\n        return self\n    def __next__(self):\n        a = self.a\n"
        "        self.a, self.b = self.b, self.a + self.b\n        return a\n"
        "class Fib:\n    def __iter__(self):\n        return Steps()\n",
    ),
    "protocols as the class defines them": (
        """
        from collections.abc import Container, Iterable
        def test_abc():
            b = Bag([1, 2])
            assert isinstance(b, Iterable) and not isinstance(b, Container) and 2 in b
            assert not callable(b) and callable(b.add) and b == b
        """,
        "class Bag:\n    def __init__(self, items):\n        self.items = items\n    def __iter__(self):\n"
        "        return iter(self.items)\n    def add(self, x):\n        self.items.append(x)\n"
        "    def __eq__(self, other):\n        return False\n    __hash__ = object.__hash__\n",
        "class Bag:\n    def __init__(self, items):\n        self.items = items\n    def __iter__(self):\n"
        "        return iter(self.items)\n    def add(self, x):\n        self.items.append(x)\n",
    ),
    # One object in two places is one object in the tests: a result's rows, an argument given back, one given
    # twice, what a call changed deep inside an argument (in a list of lists, in a tuple).
    "rows that must be one list": (
        """
        def test_rows():
            g = grid(3)
            g[0][0] = 1
            assert g[1][0] == 1
        """,
        "def grid(n):\n    return [[0] * n for _ in range(n)]\n",
        "def grid(n):\n    return [[0] * n] * n\n",
    ),
    "an argument given back as it is": (
        """
        def test_same():
            a = [3, 1, 2]
            b = sort_in_place(a)
            assert b is a and a == [1, 2, 3]
        """,
        "def sort_in_place(a):\n    return sorted(a)\n",
        "def sort_in_place(a):\n    a.sort()\n    return a\n",
    ),
    "a copy where an argument is asked back": (
        """
        def test_copy():
            a = [3, 1, 2]
            assert sorted_copy(a) is not a
        """,
        "def sorted_copy(a):\n    a.sort()\n    return a\n",
        "def sorted_copy(a):\n    return sorted(a)\n",
    ),
    "a row of a matrix changed in place": (
        """
        def test_rotate():
            m = [[1, 2], [3, 4]]
            row = m[0]
            rotate(m)
            assert m == [[3, 1], [4, 2]] and row is m[0] and row == [3, 1]
        """,
        "def rotate(m):\n    m[:] = [list(r) for r in zip(*m[::-1])]\n",
        "def rotate(m):\n    n = len(m)\n    t = [list(r) for r in zip(*m[::-1])]\n"
        "    for i in range(n):\n        m[i][:] = t[i]\n",
    ),
    "a list in a tuple changed in place": (
        """
        def test_push():
            stack = []
            push((stack, 1))
            assert stack == [1]
        """,
        "def push(pair):\n    pair = (pair[0] + [pair[1]], pair[1])\n",
        "def push(pair):\n    pair[0].append(pair[1])\n",
    ),
    "one list given twice": (
        """
        def test_twice():
            a = [1]
            extend_both(a, a)
            assert a == [1, 2, 2]
        """,
        "def extend_both(x, y):\n    x.append(2)\n    y.extend([2] if y is not x else [])\n",
        "def extend_both(x, y):\n    x.append(2)\n    y.append(2)\n",
    ),
    "a list that holds itself": (
        """
        def test_loop():
            a = looped()
            assert a[1] is a and a[0] == 1
        """,
        "def looped():\n    a = [1]\n    a.append(list(a))\n    return a\n",
        "def looped():\n    a = [1]\n    a.append(a)\n    return a\n",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_crosses_as_it_is(hostile: TestClient, case: str) -> None:
    tests, wrong, right = CASES[case]
    assert _verdicts(hostile, textwrap.dedent(tests), [wrong, right]) == ["WA", "AC"]


def test_arrays_of_objects_and_of_dates(hostile: TestClient) -> None:
    # An array of objects is one again, each item as it crossed (a list among them: no dimension of its own); one
    # of dates is made an array of its items again, as before.
    tests = "def test_o():\n    o = objects()\n    assert o.dtype == object and o.tolist() == [1, 'a', [2]]\n"
    program = (
        "import numpy as np\ndef objects():\n    o = np.empty(3, dtype=object)\n"
        "    o[:] = [1, 'a', None]\n    o[2] = [2]\n    return o\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]
    dates = "import numpy as np\ndef test_d():\n    assert len(dates()) == 2\n"
    program = "import numpy as np\ndef dates():\n    return np.array(['2024-01-01', '2024-01-02'], dtype='M8[D]')\n"
    assert _verdicts(hostile, dates, [program]) == ["AC"]


@pytest.mark.parametrize(
    "answer",
    [
        '["npa", "<f8", [3], ["l", 1, 2]]',  # fewer items than its shape
        '["npa", "<f8", [2], ["l", ["l", 1], 2]]',  # deeper than its shape
        '["npa", "<M8[ns]", [1], ["l", 1]]',  # a dtype that is not made again
        '["npa", "<i8", [1], ["l", "x"]]',  # an item no int
        '["nps", "<i8", ["l", 1]]',  # a scalar holding a list
        '["npa", "<i8", [-1], ["l"]]',  # a size below 0
    ],
)
def test_a_numpy_value_that_is_none_is_a_breach(answer: str) -> None:
    # What the program's process may answer is checked before anything is made of it; what passes the check and
    # still is no array (an item that is no int) fails as it is made: either way, no value reaches the tests.
    import json

    from codegym_sandbox.agent.plain_data import check, decode

    data = json.loads(answer)
    with pytest.raises((ValueError, TypeError)):
        check(data)
        decode(data)


def test_a_named_tuple_crosses_as_one(hostile: TestClient) -> None:
    """A named tuple crossed as a plain tuple: ``mid(Point(0, 0), Point(2, 2)).x`` failed a right program, in the
    program (it got tuples) and in the tests (they did). Its name and fields cross; its methods stay behind."""
    tests = (
        "def test_mid():\n    p = mid(Point(0, 0), Point(2, 2))\n"
        "    assert p == Point(1, 1) == (1, 1) and p.x == 1 and p._replace(y=5).y == 5\n"
    )
    program = (
        "from collections import namedtuple\nfrom typing import NamedTuple\nPoint = namedtuple('Point', 'x y')\n\n"
        "class Pair(NamedTuple):\n    x: int\n    y: int\n\n"
        "def mid(a, b):\n    return Pair((a.x + b.x) // 2, (a.y + b.y) // {})\n"
    )
    assert _verdicts(hostile, tests, [program.format(1), program.format(2)]) == ["WA", "AC"]


@pytest.mark.parametrize(
    "answer",
    [
        '["nt", "P", ["x"], 1, 2]',  # more values than fields
        '["nt", "P", ["_x"], 1]',  # a field a named tuple may not have
        '["nt", "P", ["x", "x"], 1, 2]',  # a field twice
        '["nt", "class", ["x"], 1]',  # a keyword for its name
        '["nt", "P Q", ["x"], 1]',  # no name
        '["nt", "P", "x", 1]',  # fields that are no list
        '["nt", "P", ["x"], ["zz"]]',  # a value that is no wire data
    ],
)
def test_a_named_tuple_that_is_none_is_a_breach(answer: str) -> None:
    import json

    from codegym_sandbox.agent.plain_data import check, decode

    data = json.loads(answer)
    with pytest.raises((ValueError, TypeError)):
        check(data)
        decode(data)


def test_named_tuples_of_many_names_hold_a_few_classes() -> None:
    """A class per named tuple's name and fields, made without end: 20,000 names in one answer of 550 KB held 106 MB
    in the checker (round 65, mine). Past a few hundred classes a named tuple crosses as a tuple."""
    import tracemalloc

    from codegym_sandbox.agent import plain_data

    data = ["l", *(["nt", f"Many{i}", ["x"], i] for i in range(20_000))]
    plain_data.check(data)
    tracemalloc.start()
    try:
        values = plain_data.decode(data)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 16 << 20, held
    assert values[-1] == (19_999,) and len(plain_data._CLASSES) <= plain_data._MOST_CLASSES


# A program's process that answers a call with changes or values it was never given: the patched answer adds
# what the program wants the tests to see (a list it was not passed changed, a list turned into a dict, a value
# numbered past the call's), and the run is an error (the checker's answer to any breach of its wire), never a pass.
FORGED_CHANGES = {
    "a value past the arguments changed": '{"1": ["l", 7]}',
    "a list made a dict": '{"0": ["d", [1, 2]]}',
    "a number past the call's values": '{"0": ["l", ["a", 5]]}',
}


@pytest.mark.parametrize("forged", sorted(FORGED_CHANGES))
def test_a_change_the_call_could_not_make_fails_the_test(hostile: TestClient, forged: str) -> None:
    program = (
        "import sys\n"
        "def _install():\n"
        "    plain = sys.modules['codegym_sandbox.agent.plain_channel']\n"
        "    answer = plain.Channel.answer\n"
        "    def forge(self, message):\n"
        "        if type(message) is dict and 'changed' in message:\n"
        f"            message['changed'] = {FORGED_CHANGES[forged]}\n"
        "        return answer(self, message)\n"
        "    plain.Channel.answer = forge\n"
        "def touch(a, _installed=_install()):\n"
        "    return 0\n"
    )
    tests = "def test_touch():\n    a, b = [1], [2]\n    touch(a)\n    assert a in ([7], [1]) and b == [2]\n"
    honest = "def touch(a):\n    return 0\n"
    assert _verdicts(hostile, tests, [program, honest]) == ["RE", "AC"]


@pytest.mark.parametrize(
    "block",
    [
        "    assert add(1, 2) == 3\n",  # the tests' assertion
        "    import pytest\n    pytest.fail('no')\n",  # pytest's failure
        "    add(1, 2)\n    assert False\n",  # after the program's error, an assertion left unrun
        "    {}['k']\n",  # an error of the tests' own code
        "    import sys\n    sys.exit(1)\n",  # the tests' own exit that says they failed
    ],
)
def test_a_programs_context_manager_never_ends_a_failure(hostile: TestClient, block: str) -> None:
    # Its __exit__ answers True for anything: beside the program that would swallow the tests' failures.
    program = (
        "class Quiet:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n"
        "        return True\ndef add(a, b):\n    raise ValueError('wrong')\n"
    )
    inside = "".join(f"    {line}\n" for line in block.splitlines())
    tests = f"def test_add():\n    with Quiet():\n{inside}    assert True\n"
    assert _verdicts(hostile, tests, [program]) in (["WA"], ["RE"])
    # The same block without the program's manager fails as it does with it (no error of the test's layout).
    plain = f"def test_add():\n    if True:\n{inside}    assert True\n"
    assert _verdicts(hostile, plain, [program]) in (["WA"], ["RE"])


def test_a_class_made_in_each_call_is_a_class_of_its_own(hostile: TestClient) -> None:
    # A class defined in a function is a new class at each call: each object's type is its own, however many.
    program = "def many(n):\n    return [type(f'C{i}', (), {})() for i in range(n)]\n"
    tests = "def test_many():\n    objs = many(5000)\n    assert len({type(o) for o in objs}) == 5000\n"
    assert _verdicts(hostile, tests, [program]) == ["AC"]


def test_a_long_iteration_of_the_programs_object_is_read_in_batches(hostile: TestClient) -> None:
    # 200,000 items: one round trip each took seconds (TLE); and an endless one is read only as far as the tests go.
    program = (
        "import itertools\nclass Big:\n    def __iter__(self):\n        yield from range(200000)\n"
        "class Endless:\n    def __iter__(self):\n        return itertools.count()\n"
    )
    tests = (
        "import itertools\ndef test_big():\n    assert sum(Big()) == 199999 * 100000 and max(Big()) == 199999\n"
        "    assert list(itertools.islice(Endless(), 3)) == [0, 1, 2]\n"
    )
    assert _verdicts(hostile, tests, [program]) == ["AC"]
