from __future__ import annotations

import math

import pytest
from codegym_evaluator.evaluate import EvalSummary, TaskResult
from codegym_evaluator.passk import pass_at_k
from codegym_evaluator.scoring import Score
from codegym_sandbox.verdicts import Verdict


def test_matches_the_binomial_definition() -> None:
    for n in (1, 5, 20):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1.0 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_large_n_does_not_overflow() -> None:
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    assert pass_at_k(2000, 0, 100) == 0.0
    assert pass_at_k(2000, 1999, 100) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_bad_arguments_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_a_sample_with_a_test_the_sandbox_failed_counts_in_no_pass_at_k() -> None:
    # The one predicate of every reward (Score.judged) decides what pass@k counts too: a WA whose second test the
    # sandbox failed says nothing of the program, and is left out of n as the rewards mask it.
    def score(verdict: str, tests: list[str]) -> Score:
        return Score(Verdict(verdict), tests.count("AC"), len(tests), [Verdict(t) for t in tests], "", True, 0.1)

    scores = [score("AC", ["AC", "AC"]), score("WA", ["WA", "AC"]), score("WA", ["AC", "SE"]), score("SE", [])]
    result = TaskResult("t", None, scores)
    assert (result.n, result.correct, result.sandbox_errors) == (2, 1, 2)
    assert result.pass_at(1) == pytest.approx(0.5)
    summary = EvalSummary.from_results([result], ks=(1,))
    assert summary.sandbox_errors == 2 and summary.pass_at_k == {1: pytest.approx(0.5)}
