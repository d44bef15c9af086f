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


# A LiveCodeBench-shaped task: its public test, then the private ones, which hold the public test again (contest
# test sets whose samples are among the judged files).
SAMPLE = {"stdin": "3\n", "expected_stdout": "9\n"}
PRIVATE = [{"stdin": "3", "expected_stdout": "9 \n"}, {"stdin": "5\n", "expected_stdout": "25\n"}]


def test_a_hidden_copy_of_a_shown_test_is_seen_wherever_it_stands() -> None:
    task = Task("sq", "Read n and print n squared.", "stdio", [SAMPLE, *PRIVATE], metadata={"public_tests": 1})
    assert task.seen_tests() == [True, True, False]
    # a table of the shown answer passes the copy too: it earns what an honest wrong attempt earns
    assert earned([True, True, False], task.seen_tests(), partial=True) == 0.0
    copies = Task("sq", "Read n and print n squared.", "stdio", [SAMPLE, PRIVATE[0]], metadata={"public_tests": 1})
    assert copies.shows_every_test() and copies.for_training() is None
    # a door that shows the first of a task without a split (code repair's feedback) sees its copies too
    unsplit = Task("sq", "Read n and print n squared.", "stdio", [SAMPLE, SAMPLE, PRIVATE[1]])
    assert unsplit.seen_tests(public_tests=1) == [True, True, False] and unsplit.seen_tests() == [False] * 3
    assert Task("sq", "", "stdio", [SAMPLE, SAMPLE]).for_training(public_tests=1) is None
    # not a copy: another answer to the same input, or the same answer to another input
    other = [{"stdin": "3\n", "expected_stdout": "6\n"}, {"stdin": "-3\n", "expected_stdout": "9\n"}]
    assert Task("sq", "", "stdio", [SAMPLE, *other], metadata={"public_tests": 1}).seen_tests() == [True, False, False]


def test_copies_of_a_shown_call_or_assert_are_seen() -> None:
    calls = [{"call": [2], "expected": 4}, {"call": [2], "expected": 4}, {"call": [2.0], "expected": 4}]
    task = Task("sq", "Write sq(n).", "call", calls, entry_point="sq", metadata={"public_tests": 1})
    assert task.seen_tests() == [True, True, False]  # 2.0 is another argument
    asserts = [{"assert_code": "assert f(1) == 2"}, {"assert_code": "assert f( 1 )==2  # again"}, {"assert_code": "1/"}]
    assert Task("f", "Add one.", "assert", asserts, entry_point="f").seen_tests(public_tests=1) == [True, True, False]
    assert SYNTH.seen_tests(public_tests=1) == [True, False, False]  # other asserts are not copies


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
