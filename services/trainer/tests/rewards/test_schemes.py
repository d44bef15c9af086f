from __future__ import annotations

import pytest
from codegym_evaluator.scoring import RunOutput, Score
from codegym_trainer.rewards import execution_reward
from codegym_trainer.rewards import tests_reward as scheme_tests


def score(verdict: str, passed: int, total: int = 4, *, fenced: bool = False) -> Score:
    """A score whose first ``passed`` tests passed and the rest failed with ``verdict`` (none ran after a CE)."""
    tests = [] if verdict == "CE" else ["AC"] * passed + [verdict] * (total - passed)
    return Score(verdict, passed, total, tests, "", fenced, 0.0)


@pytest.mark.parametrize(
    ("s", "partial", "expected"),
    [
        (score("AC", 4), False, 1.0),
        (score("AC", 4, fenced=True), False, 1.05),
        (score("WA", 2), False, 0.0),
        (score("WA", 2), True, 0.5),
        (score("WA", 0), True, 0.0),
        (score("CE", 0), True, -0.1),
        (score("CE", 0, fenced=True), False, -0.05),
        (score("TLE", 0), False, -0.05),
        # Partial credit is what passed, whatever the first failure: a time-out there gets what an exit on an
        # alarm of the program's own (RE) would get, never less.
        (score("TLE", 3), True, 0.75),
        (score("RE", 3), True, 0.75),
        (score("TLE", 3), False, -0.05),
        (score("TLE", 0), True, -0.05),
        (score("RE", 1), True, 0.25),
        (score("MLE", 0), False, 0.0),
    ],
)
def test_tests_scheme_table(s: Score, partial: bool, expected: float) -> None:
    assert scheme_tests(s, seen=[False] * 4, partial_credit=partial) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("s", "seen", "expected"),
    [
        # a table of the shown answers passes the shown tests alone: no credit, as an honest wrong attempt
        (score("WA", 1), [True, False, False, False], 0.0),
        (score("WA", 2), [True, True, False, False], 0.0),
        # the hidden tests that passed, of all the tests: never 1.0 while a shown test fails
        (score("WA", 2), [True, False, False, False], 0.25),
        (score("RE", 3), [True, True, False, False], 0.25),
        (score("WA", 3), [False, False, False, True], 0.75),
        # full credit needs every test, the shown ones too
        (score("AC", 4), [True, True, True, False], 1.0),
        (score("TLE", 1), [True, False, False, False], -0.05),
    ],
)
def test_partial_credit_is_earned_on_the_tests_not_shown(s: Score, seen: list[bool], expected: float) -> None:
    assert scheme_tests(s, seen=seen, partial_credit=True) == pytest.approx(expected)


def test_sandbox_error_is_masked_never_zero() -> None:
    assert scheme_tests(score("SE", 0), seen=[False] * 4, partial_credit=True) is None
    assert scheme_tests(score("SE", 0, fenced=True), seen=[False] * 4) is None
    # a test the sandbox failed to run after a wrong one: the verdict is WA, the score is still unjudged
    unjudged = Score("WA", 1, 3, ["AC", "WA", "SE"], "", True, 0.0)
    assert not unjudged.judged
    assert scheme_tests(unjudged, seen=[False] * 3, partial_credit=True) is None
    assert scheme_tests(unjudged, seen=[False] * 3) is None
    assert execution_reward(RunOutput("SE", "", "", None)) is None


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (RunOutput("AC", "42\n", "", 0), 1.0),
        (RunOutput("AC", "  \n", "", 0), 0.5),
        (RunOutput("CE", "", "SyntaxError: invalid syntax", 1), -0.5),
        (RunOutput("RE", "", "ZeroDivisionError", 1), -1.0),
        (RunOutput("TLE", "partial", "", None), -1.0),
        (RunOutput("MLE", "", "MemoryError", 1), -1.0),
    ],
)
def test_execution_scheme_table(run: RunOutput, expected: float) -> None:
    assert execution_reward(run) == expected
