"""One table decides how each dataset's tests compare, and every adapter and route takes its rule from it."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from codegym_evaluator.scoring import evaluate_body
from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.apps import APPSAdapter
from codegym_evaluator.tasks.code_contests import CodeContestsAdapter
from codegym_evaluator.tasks.livecodebench import LiveCodeBenchAdapter
from codegym_evaluator.tasks.rules import RULES, rule
from codegym_evaluator.tasks.stdio import method_assert
from codegym_evaluator.tasks.taco import TACOAdapter
from codegym_evaluator.trl_rows import row_tests
from codegym_sandbox.judging.compare import outputs_match
from codegym_sandbox.models import CallComparison, Comparison, EvaluateRequest

CALLS = {"fn_name": "f", "inputs": [[1]], "outputs": [[2]]}
STDIO = {"inputs": ["1\n"], "outputs": ["2\n"]}


def _apps(io: dict[str, Any]) -> dict[str, Any]:
    return {"id": 7, "question": "q", "input_output": json.dumps(io)}


ADAPTED: dict[str, tuple[Any, dict[str, Any]]] = {
    "apps": (APPSAdapter(), _apps(STDIO)),
    "taco": (TACOAdapter(), _apps(CALLS)),
    "code_contests": (CodeContestsAdapter(), {"name": "x", "public_tests": {"input": ["1\n"], "output": ["2\n"]}}),
    "livecodebench": (
        LiveCodeBenchAdapter(),
        {"question_id": "a", "public_test_cases": json.dumps([{"input": "1\n", "output": "2\n", "testtype": "stdin"}])},
    ),
}


@pytest.mark.parametrize("dataset", sorted(ADAPTED))
def test_each_adapter_takes_its_datasets_rule(dataset: str) -> None:
    adapter, row = ADAPTED[dataset]
    task = adapter.to_task(row, 0)
    body = evaluate_body(task, ["pass"], timeout_s=1.0, cache=False)
    want = rule(dataset)
    assert (body["comparison"], body["call_comparison"]) == (want.comparison.value, want.call_comparison.value)
    request = EvaluateRequest.model_validate(body)
    assert (request.comparison, request.call_comparison) == (want.comparison, want.call_comparison)
    for key, value in want.tolerances().items():  # a rule's own tolerances travel with it
        assert getattr(request, key) == value


COLUMNS: dict[str, tuple[dict[str, list[Any]], str]] = {
    "open-r1 stdin": ({"verification_info": [{"test_cases": [{"input": "1\n", "output": "2\n"}]}]}, "open-r1"),
    "open-r1 calls": (
        {"verification_info": [{"fn_name": "f", "test_cases": [{"input": "[1]", "output": "2"}]}]},
        "open-r1",
    ),
    "apps stdin": ({"input_output": [json.dumps(STDIO)]}, "apps"),
    "apps calls": ({"input_output": [json.dumps(CALLS)]}, "apps"),
    "mbpp asserts": ({"test_list": [["assert f(1) == 2"]]}, "mbpp"),
    "stdin pairs": ({"tests": [[{"input": "1\n", "output": "2\n"}]]}, "mbpp"),
}


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_a_trl_row_takes_the_rule_of_the_dataset_its_columns_come_from(name: str) -> None:
    columns, dataset = COLUMNS[name]
    row = row_tests(columns, 0)
    assert row.dataset == dataset
    body = evaluate_body(row.task("row"), ["pass"], timeout_s=1.0, cache=False)
    assert body["comparison"] == rule(dataset).comparison.value
    assert body["call_comparison"] == rule(dataset).call_comparison.value


def test_stdin_rows_of_the_datasets_compare_tokens_as_their_harnesses_do() -> None:
    # A trailing space or a CRLF is no wrong answer in APPS's, TACO's, LiveCodeBench's or open-r1's harness.
    for dataset in ("code_contests", "open-r1"):
        assert RULES[dataset].comparison is Comparison.WHITESPACE, dataset
    # APPS's testing_util (TACO's too) takes numbers within np.allclose: right answers printed as Python prints
    # floats pass a fixed-precision expected output; an integer stays exact, and a wrong number fails.
    for dataset in ("apps", "taco"):
        rule_ = RULES[dataset]
        assert rule_.metadata() == {
            "comparison": "float",
            "call_comparison": "apps",
            "rel_tol": 1e-5,
            "abs_tol": 1e-8,
            "solution_class": 1,  # a program's class Solution is called, as testing_util calls it
        }
        for got, want, passes in [
            ("0.3333333333333333\n0.125\n", "0.3333333333\n0.1250000000\n", True),
            ("3 \r\n", "3\n", True),
            ("0.3334\n", "0.3333333333\n", False),
            ("1000001\n", "1000000\n", False),
            ("1000000.0\n", "1000000\n", True),
        ]:
            assert outputs_match(got, want, rule_.comparison, **rule_.tolerances()) is passes, (dataset, got)
    # lcb_runner takes tokens equal as decimals: a float comparison with no tolerance.
    assert RULES["livecodebench"].metadata() == {
        "comparison": "float",
        "call_comparison": "python",
        "rel_tol": 0.0,
        "abs_tol": 0.0,
    }
    for dataset in ("apps", "taco", "open-r1"):  # APPS's testing_util, whose rows open-r1's with fn_name are
        assert RULES[dataset].call_comparison is CallComparison.APPS, dataset
    assert RULES["livecodebench"].call_comparison is CallComparison.PYTHON
    assert RULES["codegym"].metadata() == {"comparison": "exact", "call_comparison": "json"}


def test_a_rule_differs_the_key_of_a_row() -> None:
    # The same tests under two rules are two groups (CodeReward groups rows by this key).
    apps = row_tests({"input_output": [json.dumps(STDIO)]}, 0)
    plain = type(apps)(apps.language, apps.tests, apps.function)
    assert apps.key() != plain.key()
    assert plain.task("x").metadata == RULES["codegym"].metadata()


def _method_passes(expected: Any, returned: Any, dataset: str) -> bool:
    scope: dict[str, Any] = {"Solution": type("Solution", (), {"f": lambda self, x: returned})}
    try:
        exec(method_assert("Solution", "f", [1], expected, rule(dataset).call_comparison), scope)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize(
    ("expected", "returned", "apps", "livecodebench"),
    [
        (0.5, Fraction(1, 2), True, True),  # Python's ==, as APPS's and LiveCodeBench's harnesses compare
        (0.5, Decimal("0.5"), True, True),
        (1, True, True, True),
        ([1, 2], (1, 2), True, True),  # a returned tuple as a list, as they make it
        (0.5, 0.5 + 1e-9, False, False),  # no tolerance there
        ([[1, 2], [3, 4]], [(1, 2), (3, 4)], True, False),  # a list of tuples as lists: APPS's testing_util only
        ([[1, 2], [3, 4]], [(1, 2), [3, 4]], True, False),
        ([[1, 2], [3, 4]], [[1, 2], (3, 4)], False, False),  # APPS's looks at the first item only
        ([[1, 2], ["a", "b"]], [(1, 2), "ab"], False, False),  # never a string as its characters
        ([[[1, 2]]], [[(1, 2)]], False, False),  # nor deeper
        ([[1, 2], [3, 5]], [(1, 2), (3, 4)], False, False),
        ({"1": 2}, {1: 2}, False, False),
    ],
)
def test_method_asserts_compare_as_the_harnesses_do(
    expected: Any, returned: Any, apps: bool, livecodebench: bool
) -> None:
    assert _method_passes(expected, returned, "apps") is apps
    assert _method_passes(expected, returned, "livecodebench") is livecodebench


def test_every_task_kind_builds_a_valid_request_with_its_rule() -> None:
    task = Task("t", "", "call", [{"call": [1], "expected": 2}], entry_point="f", metadata=rule("apps").metadata())
    assert (
        EvaluateRequest.model_validate(evaluate_body(task, ["pass"], timeout_s=1.0, cache=False)).call_comparison.value
        == "apps"
    )
