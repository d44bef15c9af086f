"""GRPO wiring without a model: advantage signs and masking of None rewards, ours and TRL's."""

from __future__ import annotations

import math

import pytest
import torch
from codegym_trainer.grpo import StepTiming, group_advantages
from trl.trainer.utils import nanstd


def test_better_completion_gets_positive_advantage() -> None:
    adv = group_advantages([1.0, 0.0, 0.0, 0.0, -0.1, 0.05, 0.05, 0.05], 4)
    assert adv[0] > 0 and all(a < 0 for a in adv[1:4])
    assert adv[4] < 0 and all(a > 0 for a in adv[5:8])
    for g in (adv[:4], adv[4:]):
        assert sum(g) == pytest.approx(0.0, abs=1e-6)


def test_equal_rewards_give_no_signal() -> None:
    assert group_advantages([0.5, 0.5, 0.5, 0.5], 4) == [0.0, 0.0, 0.0, 0.0]


def test_masked_reward_is_left_out_of_the_baseline_and_gets_zero() -> None:
    adv = group_advantages([1.0, None, 0.0, None], 4)
    assert adv[1] == 0.0 and adv[3] == 0.0
    # the baseline is the mean of the two scored members (0.5), not of four with zeros (0.25)
    assert adv[0] == pytest.approx(-adv[2])
    assert adv[0] > 0


def test_all_masked_group_has_no_signal() -> None:
    assert group_advantages([None, None, 1.0, 0.0], 2)[:2] == [0.0, 0.0]


def test_groups_must_divide() -> None:
    with pytest.raises(ValueError, match="groups of 4"):
        group_advantages([1.0, 0.0, 1.0], 4)


def test_matches_trl_normalisation() -> None:
    # TRL's GRPO: (r - nanmean(group)) / (nanstd(group) + 1e-4), NaN rows forced to 0
    rewards = [1.05, 0.05, None, -0.1, 0.0, 0.0, 1.0, 1.0]
    t = torch.tensor([math.nan if r is None else r for r in rewards]).view(-1, 4)
    mean = torch.nanmean(t, dim=1, keepdim=True)
    std = torch.stack([nanstd(row) for row in t]).unsqueeze(1)
    trl = torch.nan_to_num((t - mean) / (std + 1e-4), nan=0.0).view(-1).tolist()
    ours = group_advantages(rewards, 4)
    assert ours == pytest.approx(trl, abs=1e-4)


def test_step_timing_split() -> None:
    t = StepTiming(generation=6.0, scoring=1.0, total=10.0)
    assert t.optimisation == pytest.approx(3.0)
    assert t.scoring_share == pytest.approx(0.1)
