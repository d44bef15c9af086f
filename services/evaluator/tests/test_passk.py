from __future__ import annotations

import math

import pytest
from codegym_evaluator.passk import pass_at_k


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
