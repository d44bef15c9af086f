from __future__ import annotations

import pytest
from codegym_evaluator.scoring import RunOutput, Score
from codegym_trainer.rewards import execution_reward
from codegym_trainer.rewards import tests_reward as scheme_tests


def score(verdict: str, passed: int, total: int = 4, *, fenced: bool = False) -> Score:
    return Score(verdict, passed, total, [], "", fenced, 0.0)


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
    assert scheme_tests(s, partial_credit=partial) == pytest.approx(expected)


def test_sandbox_error_is_masked_never_zero() -> None:
    assert scheme_tests(score("SE", 0), partial_credit=True) is None
    assert scheme_tests(score("SE", 0, fenced=True)) is None
    # a test the sandbox failed to run after a wrong one: the verdict is WA, the score is still unjudged
    unjudged = Score("WA", 1, 3, ["AC", "WA", "SE"], "", True, 0.0)
    assert not unjudged.judged
    assert scheme_tests(unjudged, partial_credit=True) is None and scheme_tests(unjudged) is None
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
