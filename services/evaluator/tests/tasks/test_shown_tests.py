"""Which tests a model sees (``tasks.shown_tests``, ``Task.shows_every_test``): each assert of an assert test its
prompt writes out by call and value, as a docstring's ``>>>`` examples write them, never one it does not show,
and the tests a door's feedback shows."""

from __future__ import annotations

import pytest
from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.shown_tests import written_out

UNIQUE = '''def unique(l: list):
    """Return sorted unique elements in a list
    >>> unique([5, 3, 5, 2, 3, 3, 9, 0, 123])
    [0, 2, 3, 5, 9, 123]
    """
'''
ASSERT = "    assert candidate([5, 3, 5, 2, 3, 3, 9, 0, 123]) == [0, 2, 3, 5, 9, 123]\n"
CHECK = "METADATA = {}\n\n\ndef check(candidate):\n" + ASSERT


def humaneval(check: str, prompt: str = UNIQUE) -> Task:
    """A task in HumanEval's shape: the whole ``check`` one assert test, run on the entry point."""
    return Task("he", prompt, "assert", [{"assert_code": f"{check}\n\ncheck(unique)\n"}], "unique", prompt)


def test_a_docstring_that_writes_every_assert_as_an_example_shows_the_test() -> None:
    """HumanEval/34's shape: its one assert is the docstring's example, so a one-line table of the answer would
    pass; it is no training task."""
    task = humaneval(CHECK)
    assert task.shows_every_test() and task.for_training() is None
    hidden = humaneval(CHECK + "    assert candidate([1, 1]) == [1]\n")
    assert not hidden.shows_every_test() and hidden.for_training() is hidden
    # MBPP-shaped asserts, each its own test, that the prompt writes as doctest examples
    prompt = "Write add(a, b).\n>>> add(1, 2)\n3\n>>> add(5, 5)\n10\n"
    asserts = [{"assert_code": "assert add(1, 2) == 3"}, {"assert_code": "assert add(5, 5) == 10"}]
    assert Task("t", prompt, "assert", asserts, "add").for_training() is None
    assert Task("t", prompt, "assert", [*asserts, {"assert_code": "assert add(2, 2) == 4"}], "add").for_training()


@pytest.mark.parametrize(
    "check",
    [
        "assert add(1, 2) == 3",
        "assert 3 == add(1, 2)",
        "assert add(1, 2) == 3, 'message'",
        "import math\nassert math.isclose(add(1, 2), 3)",
        "from math import isclose\nassert isclose(3, add(1, 2), rel_tol=1e-9)",
        "assert abs(add(1, 2) - 3) < 1e-6",
        "assert abs(3 - add(1, 2)) <= 1e-6",
        "def check(candidate):\n    assert candidate(1, 2) == 3\n\ncheck(add)",
    ],
)
def test_the_forms_of_an_assert_whose_call_and_value_are_read(check: str) -> None:
    assert written_out({"assert_code": check}, "Add two numbers.\n>>> add(1, 2)\n3\n", "add")
    assert not written_out({"assert_code": check}, "Add two numbers.\n>>> add(1, 3)\n4\n", "add")


def test_truth_asserts_read_as_true_and_false() -> None:
    prompt = ">>> is_even(4)\nTrue\n>>> is_even(3)\nFalse\n"
    for check in ("assert is_even(4)", "assert not is_even(3)", "assert is_even(4) is True"):
        assert written_out({"assert_code": check}, prompt, "is_even"), check
    for check in ("assert not is_even(4)", "assert is_even(3)"):
        assert not written_out({"assert_code": check}, prompt, "is_even"), check


@pytest.mark.parametrize(
    "check",
    [
        "for x, y in [(1, 2)]:\n    assert add(x, y) == 3",  # a loop: its data is not read
        "expected = 3\nassert add(1, 2) == expected",  # a value computed first
        "assert sorted(add(1, 2)) == 3",  # the call is not the model's function's
        "def helper(a, b):\n    return a + b\nassert helper(1, 2) == 3",  # nor is a helper of the test's own
        "assert add(1, b=2) == 3",  # keyword arguments
        "assert add(1, 2) == 3\nassert add(2, 2) == 4",  # one assert of two is written out
        "x = add(1, 2)",  # nothing asserted
        "assert add(1, 2) ==",  # does not parse
    ],
)
def test_an_assert_the_prompt_does_not_write_out_is_not_shown(check: str) -> None:
    assert not written_out({"assert_code": check}, "Add two numbers.\n>>> add(1, 2)\n3\n", "add")


def test_a_cut_check_counts_the_asserts_its_feedback_shows() -> None:
    """Of a one-test ``check`` a door cuts (``Task.visible_tests``), the asserts it shows are seen; the rest must
    each be written out for the test to be shown."""
    first = "def check(candidate):\n    assert candidate([1, 1]) == [1]\n"
    task = humaneval(first + ASSERT)
    assert not task.shows_every_test() and task.shows_every_test(public_tests=1)
    assert task.for_training() is task and task.for_training(public_tests=1) is None
    later = humaneval(CHECK + "    assert candidate([1, 1]) == [1]\n")  # the shown first one is written out anyway
    assert not later.shows_every_test(public_tests=1)
    # a hidden assert that repeats a shown one is shown: a table of the shown answer passes it too
    again = humaneval(first + "    assert candidate([1,1]) == [1]\n" + ASSERT)
    assert again.shows_every_test(public_tests=1) and not again.shows_every_test()


def test_a_repair_door_counts_the_tests_its_feedback_shows() -> None:
    """A statement that prints every test but the first, which a repair's feedback shows after a wrong answer:
    to that door every test is shown, and a table of the answers would be paid in full."""
    prompt = "Read an integer n and print 2*n.\n\nExample\nInput:\n3\nOutput:\n6\n"
    tests = [{"stdin": "7\n", "expected_stdout": "14\n"}, {"stdin": "3\n", "expected_stdout": "6\n"}]
    task = Task("double", prompt, "stdio", tests)
    assert task.for_training() is task and task.for_training(public_tests=1) is None
    hidden = Task("double", prompt, "stdio", [*tests, {"stdin": "5\n", "expected_stdout": "10\n"}])
    assert hidden.for_training(public_tests=1) is hidden
    # a training prompt that shows fewer is trained on only where the feedback leaves one of its tests hidden too
    marked = {"training_prompt": "Print 2*n.", "training_public_tests": 1}
    mbpp = Task("t", prompt, "stdio", tests, metadata={**marked, "public_tests": 2})
    trained = mbpp.for_training(public_tests=1)
    assert trained is not None and trained.prompt == "Print 2*n." and trained.visible_tests(1) == tests[:1]
    printed = Task("t", prompt, "stdio", tests, metadata={**marked, "training_prompt": prompt, "public_tests": 2})
    assert printed.for_training(public_tests=1) is None
