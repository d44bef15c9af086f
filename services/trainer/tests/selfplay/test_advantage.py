"""Role-conditioned advantages: hand-computed EMA sequences, read-before-update, per-role keys, sharing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch.distributed as dist
from codegym_trainer.selfplay.advantage import (
    ReturnSum,
    RoleBaselines,
    RoleConditionedAdvantage,
    RoleKey,
    all_gather_sums,
    episode_samples,
    merge_return_sums,
    sum_returns,
    turn_advantages,
)

TTT_X: RoleKey = ("tictactoe", "X")
TTT_O: RoleKey = ("tictactoe", "O")
FIRST: RoleKey = ("kuhn_poker", "first")


def test_one_return_a_step_follows_the_ema_by_hand() -> None:
    rae = RoleConditionedAdvantage()
    # b0 = 0
    # R=1:  A = 1 - 0 = 1;                b = 0.95 * 0 + 0.05 * 1 = 0.05
    # R=-1: A = -1 - 0.05 = -1.05;        b = 0.95 * 0.05 - 0.05 = -0.0025
    # R=1:  A = 1 + 0.0025 = 1.0025;      b = 0.95 * -0.0025 + 0.05 = 0.047625
    # R=0:  A = -0.047625;                b = 0.95 * 0.047625 = 0.04524375
    expected = [(1.0, 1.0, 0.05), (-1.0, -1.05, -0.0025), (1.0, 1.0025, 0.047625), (0.0, -0.047625, 0.04524375)]
    for value, advantage, baseline in expected:
        assert rae.step([(TTT_X, value)]) == [pytest.approx(advantage)]
        assert rae.baselines.get(TTT_X) == pytest.approx(baseline)


def test_each_game_and_role_keeps_its_own_baseline() -> None:
    rae = RoleConditionedAdvantage()
    assert rae.step([(TTT_X, 1.0), (TTT_O, -1.0), (FIRST, 2.0)]) == [1.0, -1.0, 2.0]
    assert rae.baselines.get(TTT_X) == pytest.approx(0.05)
    assert rae.baselines.get(TTT_O) == pytest.approx(-0.05)
    assert rae.baselines.get(FIRST) == pytest.approx(0.1)
    assert rae.step([(TTT_O, -1.0), (TTT_X, 1.0)]) == [pytest.approx(-0.95), pytest.approx(0.95)]


def test_every_return_of_a_step_is_measured_against_the_baseline_before_the_step() -> None:
    rae = RoleConditionedAdvantage(RoleBaselines(values={TTT_X: 0.5}))
    assert rae.step([(TTT_X, 1.0), (TTT_X, 1.0), (TTT_X, -1.0)]) == [0.5, 0.5, -1.5]
    # three returns of mean 1/3: b = 0.95**3 * 0.5 + (1 - 0.95**3) * (1/3) = 0.428687.. + 0.047708.. = 0.476395..
    assert rae.baselines.get(TTT_X) == pytest.approx(0.857375 * 0.5 + 0.142625 / 3)


def test_a_step_of_n_equal_returns_moves_the_baseline_as_n_single_updates() -> None:
    together, apart = RoleConditionedAdvantage(), RoleConditionedAdvantage()
    together.step([(TTT_X, 1.0), (TTT_X, 1.0)])
    apart.step([(TTT_X, 1.0)])
    apart.step([(TTT_X, 1.0)])
    assert together.baselines.get(TTT_X) == pytest.approx(apart.baselines.get(TTT_X)) == pytest.approx(0.0975)


def test_with_rae_off_the_advantage_is_the_return_and_baselines_are_still_tracked() -> None:
    rae = RoleConditionedAdvantage(enabled=False)
    assert rae.step([(TTT_X, 1.0)]) == [1.0]
    assert rae.step([(TTT_X, 1.0), (TTT_O, -1.0)]) == [1.0, -1.0]
    assert rae.baselines.get(TTT_X) == pytest.approx(0.0975)


def test_every_turn_of_a_role_gets_that_roles_advantage() -> None:
    samples = episode_samples("tictactoe", {"X": 1.0, "O": -1.0})
    assert samples == [(TTT_X, 1.0), (TTT_O, -1.0)]
    advantages = RoleConditionedAdvantage(RoleBaselines(values={TTT_X: 0.25, TTT_O: -0.25})).step(samples)
    by_role = {key[1]: a for key, a in zip((TTT_X, TTT_O), advantages, strict=True)}
    assert turn_advantages(["X", "O", "X", "O", "X"], by_role) == [0.75, -0.75, 0.75, -0.75, 0.75]


def test_merging_adds_sums_and_counts_in_any_order() -> None:
    a = sum_returns([(TTT_X, 1.0), (TTT_X, 0.0), (TTT_O, -1.0)])
    b = sum_returns([(TTT_X, -1.0), (FIRST, 2.0)])
    assert a == {TTT_X: ReturnSum(1.0, 2), TTT_O: ReturnSum(-1.0, 1)}
    merged = merge_return_sums([a, b, {}])
    assert merged == {TTT_X: ReturnSum(0.0, 3), TTT_O: ReturnSum(-1.0, 1), FIRST: ReturnSum(2.0, 1)}
    assert merge_return_sums([b, {}, a]) == merged


def test_processes_that_share_their_sums_hold_the_same_baselines_as_one_process_that_saw_everything() -> None:
    mine, theirs = [(TTT_X, 1.0), (TTT_O, -1.0)], [(TTT_X, -1.0), (TTT_X, 1.0), (FIRST, -2.0)]
    here = RoleConditionedAdvantage(share=lambda local: merge_return_sums([local, sum_returns(theirs)]))
    there = RoleConditionedAdvantage(share=lambda local: merge_return_sums([sum_returns(mine), local]))
    single = RoleConditionedAdvantage()
    assert here.step(mine) == [1.0, -1.0]  # only this process's advantages come back
    assert there.step(theirs) == [-1.0, 1.0, -2.0]
    single.step(mine + theirs)
    assert here.baselines.values == there.baselines.values == single.baselines.values
    # X saw 3 returns of mean 1/3: b = (1 - 0.95**3) / 3
    assert here.baselines.get(TTT_X) == pytest.approx(0.142625 / 3)


def test_baselines_survive_a_json_round_trip() -> None:
    rae = RoleConditionedAdvantage(RoleBaselines(alpha=0.9))
    rae.step([(TTT_X, 1.0), (FIRST, -2.0)])
    restored = RoleBaselines.from_state_dict(json.loads(json.dumps(rae.baselines.state_dict())))
    assert restored == rae.baselines
    assert RoleConditionedAdvantage(restored).step([(TTT_X, 0.0)]) == rae.step([(TTT_X, 0.0)]) == [pytest.approx(-0.1)]
    assert rae.baselines.metrics()["rae/baseline/tictactoe/X"] == pytest.approx(0.09)


@pytest.mark.parametrize("alpha", [-0.1, 1.0])
def test_alpha_must_leave_room_for_new_returns(alpha: float) -> None:
    with pytest.raises(ValueError):
        RoleBaselines(alpha=alpha)


def test_gathering_without_a_process_group_keeps_the_local_sums() -> None:
    sums = {TTT_X: ReturnSum(1.0, 1)}
    assert all_gather_sums(sums) is sums


def test_gathering_through_a_torch_process_group(tmp_path: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        rae = RoleConditionedAdvantage(share=all_gather_sums)
        assert rae.step([(TTT_O, 1.0), (TTT_X, -1.0)]) == [1.0, -1.0]
        assert rae.baselines.get(TTT_X) == pytest.approx(-0.05) and rae.baselines.get(TTT_O) == pytest.approx(0.05)
        assert all_gather_sums({TTT_X: ReturnSum(2.0, 3)}) == {TTT_X: ReturnSum(2.0, 3)}
    finally:
        dist.destroy_process_group()
