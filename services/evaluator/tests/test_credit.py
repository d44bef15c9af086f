"""Partial credit is earned on the tests a model was not shown (``credit.earned``, ``Task.seen_tests``)."""

from __future__ import annotations

import pytest
from codegym_evaluator.credit import earned
from codegym_evaluator.tasks import Task

ASSERTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"]
# codegym-data synthesize's prompt: the first test written out as the example, and judged too
SYNTH = Task(
    "synth/f",
    "Add one.\n\nWrite a Python function `f(x)`. Your code should pass tests like this one:\n\nassert f(1) == 2\n",
    "assert",
    [{"assert_code": a} for a in ASSERTS],
    entry_point="f",
)


def test_seen_tests_are_those_written_out_and_those_the_door_shows() -> None:
    assert SYNTH.seen_tests() == [True, False, False]
    assert SYNTH.seen_tests(public_tests=2) == [True, True, False]  # a door that shows the first two as feedback
    assert SYNTH.seen_tests("Add one.") == [False, False, False]  # another prompt: what it writes out
    split = Task("t", "Add one.", "assert", SYNTH.tests, entry_point="f", metadata={"public_tests": 1})
    assert split.seen_tests() == [True, False, False]  # a dataset's own public tests
    assert not SYNTH.shows_every_test() and SYNTH.shows_every_test(public_tests=2, prompt=SYNTH.prompt + ASSERTS[2])


@pytest.mark.parametrize(
    ("passes", "seen", "partial", "expected"),
    [
        ([True, False, False], [True, False, False], True, 0.0),  # the example's table: no credit
        ([False, True, False], [True, False, False], True, 1 / 3),
        ([False, True, True], [True, False, False], True, 2 / 3),  # every hidden test, not the example: below 1.0
        ([True, True, True], [True, False, False], True, 1.0),
        ([True, True, True], [True, True, True], False, 1.0),
        ([True, True], [True, True, False], True, 0.0),  # the third was not run (early stop): not passed
        ([True, True, False], [False, False, False], False, 0.0),
        ([], [False, False], True, 0.0),  # a compile error runs no test
    ],
)
def test_earned(passes: list[bool], seen: list[bool], partial: bool, expected: float) -> None:
    assert earned(passes, seen, partial=partial) == pytest.approx(expected)


def test_more_results_than_tests_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="3 test results for a task of 2 tests"):
        earned([True, True, True], [False, False], partial=True)
