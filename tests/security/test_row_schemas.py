"""A row's tests are read by a schema: a test case without its expected value, or tests that can never fail,
are refused with a message, never judged. A default in their place (``""``, ``None``, a ``check`` nobody
calls) is an expected value a program that computes nothing matches.

Rows are data, not the policy's; but a data set whose expected values sit under another name than the format's
(``expected_output`` for open-r1's ``output``) would otherwise reward the empty program and punish the right one,
silently, for a whole training run.
"""

from __future__ import annotations

from typing import Any

import pytest
from codegym_evaluator.trl_reward import row_tests
from codegym_sandbox.models import EvaluateRequest
from pydantic import ValidationError

NAMED_ELSEWHERE: dict[str, dict[str, list[Any]]] = {
    "open-r1 stdin, expected_output": {
        "verification_info": [{"language": "python", "test_cases": [{"input": "1 2\n", "expected_output": "3\n"}]}]
    },
    "open-r1 call, no output": {
        "verification_info": [{"language": "python", "fn_name": "f", "test_cases": [{"input": "[1, 2]"}]}]
    },
    "tests dicts, stdout": {"tests": [[{"input": "1 2\n", "stdout": "3\n"}]]},
    "APPS, fewer outputs than inputs": {"input_output": [{"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n"]}]},
    "APPS call, more outputs than inputs": {"input_output": [{"fn_name": "f", "inputs": [[1]], "outputs": [[1], [2]]}]},
}


@pytest.mark.parametrize("columns", NAMED_ELSEWHERE.values(), ids=NAMED_ELSEWHERE.keys())
def test_a_test_case_without_its_expected_value_is_refused(columns: dict[str, list[Any]]) -> None:
    with pytest.raises(ValueError, match="row 0: "):
        row_tests(columns, 0)


def test_tests_that_define_check_and_never_call_it_are_refused_without_an_entry_point() -> None:
    tests = "def check(candidate):\n    assert candidate(1) == 2\n"
    with pytest.raises(ValueError, match="never call it"):
        row_tests({"tests": [tests]}, 0)
    called = row_tests({"tests": [tests], "entry_point": ["inc"]}, 0)
    assert called.tests[0]["assert_code"].endswith("check(inc)")
    assert row_tests({"tests": [tests + "check(inc)\n"]}, 0).tests  # called by the tests themselves


def test_a_case_with_its_expected_value_under_the_formats_name_is_read() -> None:
    row = row_tests({"tests": [[{"stdin": "1 2\n", "expected_stdout": "3\n"}, {"input": "2", "output": ""}]]}, 0)
    assert [t["expected_stdout"] for t in row.tests] == ["3\n", ""]  # an empty expected output, given, is kept
    call = row_tests({"verification_info": [{"fn_name": "f", "test_cases": [{"input": "[1]", "output": "null"}]}]}, 0)
    assert call.tests[0] == {"call": [1], "expected": None}  # null, given, is a value


def test_a_call_test_without_expected_is_refused_by_the_native_api() -> None:
    body = {"language": "python", "programs": ["def f(a, b):\n    return None\n"], "function": "f"}
    with pytest.raises(ValidationError, match="needs `expected`"):
        EvaluateRequest.model_validate({**body, "tests": [{"call": [1, 2]}]})
    given = EvaluateRequest.model_validate({**body, "tests": [{"call": [1, 2], "expected": None}]})
    assert given.tests[0].expected is None
