"""Values that cross between the program's process and the checker keep the equality Python gives them.

A mapping crossed as a plain dict: an ``OrderedDict`` in the wrong order passed a test that compares it with one
in the right order, an honest ``Counter`` failed a test that compares it with one holding a zero, and an honest
``defaultdict`` one of a missing key's default.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

ORDERED = (
    "from collections import OrderedDict\n"
    "assert by_count({'a': 1, 'b': 2}) == OrderedDict([('b', 2), ('a', 1)])\n"
    "assert isinstance(by_count({}), OrderedDict)\n"
)
COUNTED = "from collections import Counter\nassert count('aab') == Counter(a=2, b=1, c=0)\nassert not count('')\n"
SMALL, LARGE = "lambda item: item[1]", "lambda item: -item[1]"
HEAD = "from collections import OrderedDict\ndef by_count(d):\n    return OrderedDict(sorted(d.items(), key="
CASES = {
    "ordered": (
        ORDERED,
        HEAD + SMALL + "))\n",
        HEAD + LARGE + "))\n",
    ),
    # A defaultdict crossed as a dict: a right program failed a test of a missing key's default.
    "defaulted": (
        "from collections import defaultdict\nd = group(['ab', 'b'])\n"
        "assert isinstance(d, defaultdict) and d['zz'] == []\n"
        "assert d == {'a': ['ab'], 'b': ['b'], 'zz': []}\n",
        "def group(words):\n    return {w[0]: [x for x in words if x[0] == w[0]] for w in words}\n",
        "from collections import defaultdict\ndef group(words):\n    d = defaultdict(list)\n    for w in words:\n"
        "        d[w[0]].append(w)\n    return d\n",
    ),
    "counted": (
        COUNTED,
        "def count(s):\n    return {c: s.count(c) for c in set(s)}\n",
        "from collections import Counter\ndef count(s):\n    return Counter(s)\n",
    ),
}


def _verdicts(client: TestClient, tests: str, programs: list[str]) -> list[str]:
    body: dict[str, Any] = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    return [p["verdict"] for p in r.json()["results"]]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_mapping_crosses_with_its_own_equality(hostile: TestClient, case: str) -> None:
    tests, wrong, right = CASES[case]
    assert _verdicts(hostile, tests, [wrong, right]) == ["WA", "AC"]


@pytest.mark.parametrize(
    ("program", "tests"),
    [
        (
            "def touch(d):\n    d.move_to_end('a')\n",
            "from collections import OrderedDict\nd = OrderedDict([('a', 1), ('b', 2)])\ntouch(d)\n"
            "assert list(d) == ['b', 'a']\n",
        ),
        (
            "def count(c):\n    c['x'] += 1\n    return c['zz']\n",
            "from collections import Counter\nc = Counter()\nassert count(c) == 0\nassert c['x'] == 1\n",
        ),
        (
            "def index(d, words):\n    for w in words:\n        d[len(w)].append(w)\n    d.default_factory = None\n",
            "from collections import defaultdict\nd = defaultdict(list)\nindex(d, ['a', 'bc', 'd'])\n"
            "assert d == {1: ['a', 'd'], 2: ['bc']} and d[3] == []\n",
        ),
    ],
    ids=["ordered", "counted", "defaulted"],
)
def test_a_mapping_changed_in_place_reaches_the_tests(hostile: TestClient, program: str, tests: str) -> None:
    assert _verdicts(hostile, tests, [program]) == ["AC"]


MONEY = (
    "class Money:\n    def __init__(self, v):\n        self.v = v\n\n    def __add__(self, other):\n"
    "        if not isinstance(other, Money):\n            raise TypeError('money only')\n"
    "        return Money(self.v + other.v)\n\n    def __lt__(self, other):\n        return self.v < other.v\n\n"
    "    def __eq__(self, other):\n        return isinstance(other, Money) and self.v == other.v\n\n"
    "    def __str__(self):\n        return f'${self.v}'\n\n    def __format__(self, spec):\n"
    "        return format(str(self), spec)\n"
)


def test_the_programs_objects_act_as_in_one_process(hostile: TestClient) -> None:
    """``V(1) + V(2)``, ``sorted`` of its objects, ``str()`` and f-strings of one, ``obj.x = 5``: the program's
    own operators, ``__str__`` and attributes, as in one process (they failed honest programs)."""
    tests = (
        "from solution import Money\n\ndef test_ops():\n    assert Money(1) + Money(2) == Money(3)\n"
        "    assert sorted([Money(3), Money(1)]) == [Money(1), Money(3)] and Money(1) < Money(2)\n"
        "    assert str(Money(5)) == '$5' and f'{Money(5):>4}' == '  $5'\n"
        "    m = Money(1)\n    m.v = 7\n    assert m.v == 7\n"
    )
    wrong = MONEY.replace("f'${self.v}'", "f'{self.v}$'")
    assert _verdicts(hostile, tests, [MONEY, wrong]) == ["AC", "WA"]


def test_no_operator_of_the_programs_decides_with_the_tests_values(hostile: TestClient) -> None:
    """``abs(result - expected) < 1e-6``, ``money < 3``: the program would see the tests' expected value and answer
    what passes. No operator runs between the program's object and a value of the tests', and what it raises is no
    ``TypeError`` of the tests' ``pytest.raises`` (which any program met)."""
    rigged = (
        "class Anything:\n    def __sub__(self, other):\n        return self\n\n    def __rsub__(self, other):\n"
        "        return self\n\n    def __abs__(self):\n        return self\n\n    def __lt__(self, other):\n"
        "        return True\n\n    def __add__(self, other):\n        return self\n\n"
        "def area(r):\n    return Anything()\n\ndef add(a, b):\n    return Anything()\n"
    )
    zero = (  # a difference that answers 0: the program would see the expected value and decide the check
        "class Zero:\n    def __sub__(self, other):\n        return 0\n\n    __rsub__ = __sub__\n\n"
        "    def __truediv__(self, other):\n        return 1.0\n\ndef area(r):\n    return Zero()\n"
    )
    for tests in (
        "assert abs(area(1) - 3.14159) < 1e-4\n",
        "assert area(1) < 4 and not area(1) < 3\n",
        "assert abs(3.14159 - area(1)) < 1e-6\n",
        "import math\nassert math.isclose(area(1) / 3.14159, 1.0)\n",
        "import unittest\nunittest.TestCase().assertAlmostEqual(area(1), 3.14159)\n",
    ):
        for program in (rigged, zero):
            assert _verdicts(hostile, tests, [program]) == ["RE"], (tests, program)
    # Arithmetic with the tests' value is the program's own (it raises TypeError or not, as in one process).
    raises = "import pytest\n\ndef test_a():\n    with pytest.raises(TypeError):\n        add(1, 2) + 'abc'\n"
    assert _verdicts(hostile, raises, [rigged]) == ["WA"]


def test_the_programs_arithmetic_and_numbers_are_its_own(hostile: TestClient) -> None:
    """``V(2) * 3``, ``sum`` of its objects, ``math.isclose`` of one with ``__float__``, ``round``, ``int``."""
    program = (
        "class V:\n    def __init__(self, x):\n        self.x = x\n\n    def __mul__(self, k):\n"
        "        return V(self.x * k)\n\n    def __add__(self, o):\n"
        "        return V(self.x + (o.x if isinstance(o, V) else o))\n\n"
        "    __radd__ = __add__\n\n    def __float__(self):\n        return float(self.x)\n\n    def __int__(self):\n"
        "        return int(self.x)\n\n    def __round__(self, n=None):\n        return round(self.x, n)\n"
    )
    tests = (
        "import math\nfrom solution import V\n\ndef test_a():\n    assert (V(2) * 3).x == 6\n"
        "    assert sum([V(1), V(2)]).x == 3\n"
        "    assert math.isclose(V(2), 2.0) and round(V(2.26), 1) == 2.3 and int(V(7)) == 7\n"
    )
    assert _verdicts(hostile, tests, [program, program.replace("self.x * k", "self.x * k + 1")]) == ["AC", "WA"]
