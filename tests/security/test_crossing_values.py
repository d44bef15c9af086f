"""Values that cross between the program's process and the checker keep the equality Python gives them.

A mapping crossed as a plain dict: an ``OrderedDict`` in the wrong order passed a test that compares it with one
in the right order, and an honest ``Counter`` failed a test that compares it with one holding a zero.
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
    ],
    ids=["ordered", "counted"],
)
def test_a_mapping_changed_in_place_reaches_the_tests(hostile: TestClient, program: str, tests: str) -> None:
    assert _verdicts(hostile, tests, [program]) == ["AC"]
