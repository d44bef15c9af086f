"""Every route compares a test's output or value by the rule of the dataset it comes from, and no rule passes
what it should not (issue 31, families 4, 7 and 8).

- No number matches when it should not: a call test whose expected value is an integer takes the same number
  only, never one within a tolerance of it; an output compared as floats never matches because two large
  numbers both became infinity.
- A call test accepts what the dataset's own harness accepts: APPS's and LiveCodeBench's compare with Python's
  ``==`` (``True`` for ``1``, a ``Fraction`` or a ``Decimal`` equal to the float; APPS's a list of tuples for a
  list of lists too), codegym's own as JSON values.
- LiveCodeBench's stdin tests take tokens equal as decimals, as lcb_runner does (``4.0`` for ``4``), and
  nothing nearer than that (``4.0000000001``, ``nan``, ``inf``).
- ``CodeReward`` judges a row's stdin tests as the adapters of its dataset do (``tasks.rules``): a trailing
  space or a CRLF that APPS's and open-r1's harnesses strip is no wrong answer there either.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from codegym_evaluator.scoring import evaluate_body
from codegym_evaluator.tasks.apps import APPSAdapter
from codegym_evaluator.tasks.livecodebench import LiveCodeBenchAdapter
from codegym_evaluator.trl_reward import CodeReward
from fastapi.testclient import TestClient

from .transports import forwarding

LIMITS = {"timeout_s": 3.0}


def _verdicts(client: TestClient, body: dict[str, Any]) -> list[str]:
    r = client.post("/v1/evaluate", json={"cache": False, "limits": LIMITS, **body})
    assert r.status_code == 200, r.text
    return [str(p["verdict"]) for p in r.json()["results"]]


def _calls(client: TestClient, programs: list[str], expected: Any, rule: str | None = None) -> list[str]:
    body: dict[str, Any] = {
        "language": "python",
        "programs": programs,
        "function": "f",
        "tests": [{"call": [], "expected": expected}],
    }
    if rule is not None:
        body["call_comparison"] = rule
    return _verdicts(client, body)


# Each returns something near 10**15 that is not it: within the default tolerance of it as a float.
NEAR_AN_INTEGER = {
    "float-within-tolerance": "def f():\n    return 10**15 + 0.25\n",
    "float-rounded": "def f():\n    return float(10**15 + 1)\n",
    "int-within-tolerance": "def f():\n    return 10**15 + 1\n",
}


@pytest.mark.parametrize("rule", [None, "json", "python", "apps"])
def test_an_expected_integer_takes_that_number_only(hostile: TestClient, rule: str | None) -> None:
    right = ["def f():\n    return 10**15\n", "def f():\n    return 1e15\n"]  # the same number, as an int or a float
    assert _calls(hostile, right + list(NEAR_AN_INTEGER.values()), 10**15, rule) == ["AC", "AC", "WA", "WA", "WA"]


@pytest.mark.parametrize("rule", [None, "python", "apps"])
def test_no_value_matches_by_overflow(hostile: TestClient, rule: str | None) -> None:
    huge = 10**400
    programs = [
        "def f():\n    return 10**400\n",
        "def f():\n    return 10**400 + 1\n",
        "def f():\n    return 2 * 10**400\n",
    ]
    assert _calls(hostile, programs, huge, rule) == ["AC", "WA", "WA"]
    # An int beyond a float's range against an expected float: compared exactly, never an overflow.
    assert _calls(hostile, programs[:1], 1e300, rule) == ["WA"]


def test_no_output_matches_by_overflow(hostile: TestClient) -> None:
    big = "1" + "0" * 400
    programs = [f"print('{big}')\n", f"print('{big}1')\n", f"print('2{big[1:]}')\n", "print('1e400')\n"]
    for expected in (big, "1.0e400"):
        body = {
            "language": "python",
            "programs": programs,
            "comparison": "float",
            "tests": [{"stdin": "", "expected_stdout": expected + "\n"}],
        }
        assert _verdicts(hostile, body) == ["AC", "WA", "WA", "AC"], expected


def test_no_output_stops_the_judge(hostile: TestClient) -> None:
    """A number past any decimal's exponent, or digits of another script, is a wrong answer of its program: once,
    it was an error of the whole request (500), which took every other program's verdict with it."""
    programs = ["print('1e9999999999999999999999999')\n", "print('\u0661.5')\n", "print(1.5)\n"]
    body = {"language": "python", "programs": programs, "comparison": "float", "cache": False}
    assert _verdicts(hostile, {**body, "tests": [{"stdin": "", "expected_stdout": "1.5\n"}]}) == ["WA", "WA", "AC"]


# What APPS's and LiveCodeBench's harnesses accept for an expected value (Python's ==), and what they do not;
# with the verdict of codegym's own rule (JSON values: a bool is no number, a Fraction no JSON value).
PYTHON_EQUAL = {
    "true-for-1": ("def f():\n    return True\n", 1, "WA"),
    "1-for-true": ("def f():\n    return 1\n", True, "WA"),
    "fraction-for-a-float": ("from fractions import Fraction\ndef f():\n    return Fraction(1, 2)\n", 0.5, "RE"),
    "decimal-for-a-float": ("from decimal import Decimal\ndef f():\n    return Decimal('0.25')\n", 0.25, "RE"),
    "tuple-for-a-list": ("def f():\n    return (1, 2)\n", [1, 2], "AC"),
    # A named tuple and a defaultdict are JSON values as a tuple and a dict are (the first was an RE under json).
    "named-tuple-for-a-list": (
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)\n",
        [1, 2],
        "AC",
    ),
    "defaultdict-for-a-dict": (
        "from collections import defaultdict\ndef f():\n    d = defaultdict(list)\n    d['a'] += [1]\n    return d\n",
        {"a": [1]},
        "AC",
    ),
}
PYTHON_UNEQUAL = {
    "fraction-near-a-float": ("from fractions import Fraction\ndef f():\n    return Fraction(1, 3)\n", 0.3333333),
    "false-for-1": ("def f():\n    return False\n", 1),
    "always-equal": ("class A:\n    def __eq__(self, o):\n        return True\ndef f():\n    return A()\n", 1),
    "always-equal-float": (
        "class A(float):\n    def __eq__(self, o):\n        return True\ndef f():\n    return A(9)\n",
        1.0,
    ),
}


@pytest.mark.parametrize("case", sorted(PYTHON_EQUAL))
def test_the_python_rule_takes_what_the_harness_takes(hostile: TestClient, case: str) -> None:
    program, expected, as_json = PYTHON_EQUAL[case]
    assert _calls(hostile, [program], expected, "python") == ["AC"], case
    assert _calls(hostile, [program], expected, "apps") == ["AC"], case
    assert _calls(hostile, [program], expected, "json") == [as_json], case


@pytest.mark.parametrize("case", sorted(PYTHON_UNEQUAL))
def test_the_python_rule_takes_nothing_more(hostile: TestClient, case: str) -> None:
    program, expected = PYTHON_UNEQUAL[case]
    assert _calls(hostile, [program], expected, "python") == ["WA"], case
    assert _calls(hostile, [program], expected, "apps") == ["WA"], case


def _apps_body(row: dict[str, Any], programs: list[str]) -> dict[str, Any]:
    task = APPSAdapter().to_task(row, 0)
    assert task is not None
    return evaluate_body(task, [task.starter_code + p for p in programs], timeout_s=3.0, cache=False)


def test_apps_tasks_compare_as_apps_harness_does(hostile: TestClient) -> None:
    calls = {"fn_name": "half", "inputs": [[1], [3]], "outputs": [[0.5], [1.5]]}
    fraction = "from fractions import Fraction\ndef half(x):\n    return Fraction(x, 2)\n"
    near = "def half(x):\n    return x / 2 + 1e-9\n"  # within a tolerance, which APPS's == does not have
    body = _apps_body({"id": 1, "input_output": json.dumps(calls)}, [fraction, near])
    assert _verdicts(hostile, body) == ["AC", "WA"]
    # A LeetCode-style starter: assert tests on Solution().half, with the same ==.
    solution = {"id": 2, "input_output": json.dumps(calls), "starter_code": "class Solution:\n    def half(self, x):"}
    methods = ["class Solution:\n" + "\n".join("    " + line for line in p.splitlines()) for p in (fraction, near)]
    methods[0] = "from fractions import Fraction\n" + methods[0].replace("    from fractions import Fraction\n", "")
    methods = [m.replace("def half(x)", "def half(self, x)") for m in methods]
    assert _verdicts(hostile, _apps_body(solution, methods)) == ["AC", "WA"]
    # Stdin tests: tokens, as APPS's harness strips and splits them.
    stdio = {"id": 3, "input_output": json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"]})}
    programs = ["import sys\nsys.stdout.write('5 \\r\\n')\n", "print(6)\n"]
    assert _verdicts(hostile, _apps_body(stdio, programs)) == ["AC", "WA"]


def test_livecodebench_stdin_tasks_compare_tokens_as_decimals(hostile: TestClient) -> None:
    # An AtCoder-style row: the mean of two integers, written as the contest writes it (4, 1.5, 15).
    cases = [
        {"input": f"{a} {b}\n", "output": out, "testtype": "stdin"}
        for a, b, out in [(3, 5, "4\n"), (1, 2, "1.5\n"), (10, 20, "15\n")]
    ]
    row = {"question_id": "abc999_a", "public_test_cases": json.dumps(cases)}
    task = LiveCodeBenchAdapter().to_task(row, 0)
    assert task is not None
    read = "a, b = map(int, input().split())\n"
    right = [
        f"{read}print((a + b) / 2)\n",
        f"{read}print(f'{{(a + b) / 2:e}}')\n",
        f"{read}print(f'{{(a + b) / 2:.2f}}')\n",
    ]
    wrong = [
        f"{read}print((a + b) / 2 + 1e-10)\n",
        f"{read}print(float('nan'))\n",
        f"{read}print(float('inf'))\n",
        f"{read}print((a + b) // 2)\n",
    ]
    body = evaluate_body(task, right + wrong, timeout_s=3.0, cache=False)
    assert _verdicts(hostile, body) == ["AC"] * len(right) + ["WA"] * len(wrong)


def test_apps_call_rows_take_a_list_of_tuples_as_apps_harness_does(hostile: TestClient) -> None:
    calls = {"fn_name": "squares", "inputs": [[2], [3]], "outputs": [[[[0, 0], [1, 1]]], [[[0, 0], [1, 1], [2, 4]]]]}
    right = [
        "def squares(n):\n    return [(i, i * i) for i in range(n)]\n",
        "def squares(n):\n    return [[i, i * i] for i in range(n)]\n",
        "def squares(n):\n    return tuple((i, i * i) for i in range(n))\n",
    ]
    wrong = [
        "def squares(n):\n    return [(i, i * i + 1) for i in range(n)]\n",
        "def squares(n):\n    return [[(i, i * i)] for i in range(n)]\n",  # deeper than APPS's harness looks
        "def squares(n):\n    return [(i, i * i) for i in range(n)][:1]\n",
    ]
    body = _apps_body({"id": 1, "input_output": json.dumps(calls)}, right + wrong)
    assert _verdicts(hostile, body) == ["AC"] * len(right) + ["WA"] * len(wrong)
    # A LeetCode-style starter: assert tests on Solution().squares, with the same rule.
    solution = {
        "id": 2,
        "input_output": json.dumps(calls),
        "starter_code": "class Solution:\n    def squares(self, n):",
    }
    methods = [
        p.replace("def squares(n):\n   ", "class Solution:\n    def squares(self, n):\n       ") for p in right + wrong
    ]
    assert _verdicts(hostile, _apps_body(solution, methods)) == ["AC"] * len(right) + ["WA"] * len(wrong)


# Right answers written as programs write them (a trailing space, a CRLF, no final newline), and wrong ones.
STDIN_RIGHT = [
    "a, b = map(int, input().split())\nprint(a + b, end=' \\n')\n",
    "import sys\na, b = map(int, input().split())\nsys.stdout.write(f'{a + b}\\r\\n')\n",
    "a, b = map(int, input().split())\nprint(a + b, end='')\n",
]
STDIN_WRONG = ["a, b = map(int, input().split())\nprint(a + b, a)\n", "print('')\n"]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_code_reward_judges_stdin_rows_as_their_datasets_do(hostile: TestClient, api: str) -> None:
    reward = CodeReward("http://codegym", api=api, transport=forwarding(hostile))  # type: ignore[arg-type]
    completions = [f"```python\n{p}```" for p in STDIN_RIGHT + STDIN_WRONG]
    n = len(completions)
    cases = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10"}]
    open_r1 = {"verification_info": [{"language": "python", "test_cases": cases}] * n}
    apps = {"input_output": [json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})] * n}
    want = [1.0] * len(STDIN_RIGHT) + [0.0] * len(STDIN_WRONG)
    assert reward(completions=completions, **open_r1) == want
    assert reward(completions=completions, **apps) == want


def test_code_reward_judges_apps_call_rows_as_apps_harness_does(hostile: TestClient) -> None:
    reward = CodeReward("http://codegym", transport=forwarding(hostile))
    row = json.dumps({"fn_name": "even", "inputs": [[2], [3]], "outputs": [[1], [0]]})  # APPS wraps outputs
    programs = ["def even(x):\n    return x % 2 == 0\n", "def even(x):\n    return 1 - x % 2 + 1e-9\n"]
    completions = [f"```python\n{p}```" for p in programs]
    assert reward(completions=completions, input_output=[row] * 2) == [1.0, 0.0]
