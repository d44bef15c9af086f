"""The bootstrap interval over problems and the spread over seeds."""

from __future__ import annotations

import math

import pytest
from codegym_trainer.stats import bootstrap_interval, mean_sd, over_seeds, wilson_interval


def test_interval_holds_the_mean_and_is_reproducible() -> None:
    values = [1.0, 0.0, 0.0, 1.0, 0.5, 0.25, 0.0, 1.0]
    first = bootstrap_interval(values, seed=3)
    assert first.mean == pytest.approx(sum(values) / len(values))
    assert 0.0 <= first.low < first.mean < first.high <= 1.0
    assert bootstrap_interval(values, seed=3) == first


def test_interval_narrows_with_more_problems() -> None:
    few = bootstrap_interval([1.0, 0.0] * 4)
    many = bootstrap_interval([1.0, 0.0] * 100)
    assert many.half_width < few.half_width / 3  # about 1/sqrt(25) of it
    # a fair coin over 200 problems: the 95% interval is about +-1.96 * 0.5 / sqrt(200) = +-0.069
    assert many.half_width == pytest.approx(1.96 * 0.5 / math.sqrt(200), abs=0.015)


def test_interval_of_values_all_alike_has_no_width() -> None:
    assert bootstrap_interval([0.0] * 5).half_width == 0.0
    assert bootstrap_interval([1.0]).low == bootstrap_interval([1.0]).high == 1.0


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        bootstrap_interval([])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval([1.0], confidence=1.0)


def test_mean_sd_by_hand() -> None:
    assert mean_sd([0.1, 0.3, 0.2]) == pytest.approx((0.2, 0.1))
    assert mean_sd([0.5]) == (0.5, 0.0)
    with pytest.raises(ValueError):
        mean_sd([])


def test_what_changes_over_seeds_support() -> None:
    assert over_seeds([0.5]) == "one seed cannot separate learning from noise"
    assert over_seeds([0.1, 0.2, 0.15]) == "the gain holds over seeds"
    assert over_seeds([0.3, -0.1, 0.1]) == "the gain does not hold over seeds (within seed noise)"
    assert over_seeds([0.01, 0.5, 0.02]) == "the gain does not hold over seeds (within seed noise)"  # sd > mean
    assert over_seeds([0.0, -0.1]) == "no gain (a null result)"
    assert over_seeds([-0.35, -0.35, -0.35]) == "a loss that holds over seeds: training made it worse"
    assert over_seeds([-0.3, 0.1, -0.1]) == "no gain (a null result)"  # one seed gained


def test_wilson_interval_of_greedy_answers_is_never_certain_from_a_few_problems() -> None:
    all_solved = wilson_interval(8, 8)
    assert all_solved.mean == 1.0 and all_solved.high == 1.0
    assert 0.67 < all_solved.low < 0.69  # 8 of 8 is about [0.68, 1.00], not [1.00, 1.00]
    none_solved = wilson_interval(0, 8)
    assert none_solved.low == 0.0 and 0.31 < none_solved.high < 0.33
    six = wilson_interval(6, 8)
    assert 0.40 < six.low < 0.41 and 0.92 < six.high < 0.93
    assert wilson_interval(100, 200).half_width < wilson_interval(4, 8).half_width
    with pytest.raises(ValueError):
        wilson_interval(9, 8)
