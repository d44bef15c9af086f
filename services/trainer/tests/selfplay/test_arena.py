"""Playing batches of games: self-play turns and returns, one policy call per round, evaluation records."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest
from codegym_trainer.selfplay.arena import Record, evaluate_against, evaluation_metrics, play_games
from codegym_trainer.selfplay.games import KuhnPoker, TicTacToe
from codegym_trainer.selfplay.opponents import KuhnEquilibrium, MinimaxOpponent, RandomOpponent


class LowestFreeCell:
    """A policy that reads the free cells from each observation and names the lowest; it counts its calls."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, observations: Sequence[str]) -> list[str]:
        self.batches.append(len(observations))
        answers = []
        for observation in observations:
            match = re.search(r"Free cells: ([\d, ]+)\.", observation)
            assert match is not None
            answers.append(f"I take [{match.group(1).split(',')[0]}]")
        return answers


def test_self_play_records_every_turn_of_both_roles() -> None:
    policy = LowestFreeCell()
    episodes = play_games([TicTacToe()] * 3, policy)
    # X takes 1, 3, 5, 7 and wins on the diagonal 3-5-7 at the seventh move; O took 2, 4, 6.
    assert policy.batches == [3] * 7  # every game waits each round: one call answers all three
    for episode in episodes:
        assert [t.role for t in episode.turns] == ["X", "O", "X", "O", "X", "O", "X"]
        assert episode.returns == {"X": 1.0, "O": -1.0} and episode.game == "tictactoe"
        assert isinstance(episode.final, TicTacToe)
        assert episode.final.board == ("X", "O", "X", "O", "X", "O", "X", ".", ".")
        assert "as O" in episode.turns[1].observation and episode.turns[1].answer == "I take [2]"


def test_an_unparsable_answer_ends_the_game() -> None:
    [episode] = play_games([TicTacToe()], lambda observations: ["no idea"] * len(observations))
    assert len(episode.turns) == 1 and episode.final.forfeited_by == "X" and episode.returns["X"] == -1.0


def test_the_policy_must_answer_every_position() -> None:
    with pytest.raises(ValueError, match="answered 0 of 1"):
        play_games([TicTacToe()], lambda observations: [])


def test_opponents_move_for_their_seats_without_a_policy_call() -> None:
    policy = LowestFreeCell()
    [episode] = play_games([TicTacToe()], policy, [{"X": MinimaxOpponent(0)}])
    assert all(turn.role == "O" for turn in episode.turns)
    assert episode.returns["O"] <= 0.0  # the lowest free cell never beats perfect play
    assert policy.batches == [1] * len(episode.turns)


def test_evaluation_counts_each_role_against_the_opponent() -> None:
    records = evaluate_against(TicTacToe.new, LowestFreeCell(), MinimaxOpponent(0), games_per_role=5)
    assert set(records) == {"X", "O"}
    for record in records.values():
        assert record.games == 5 and record.wins == 0 and record.forfeits == 0


def test_forfeits_are_losses_and_are_counted() -> None:
    records = evaluate_against(TicTacToe.new, lambda obs: ["pass"] * len(obs), RandomOpponent(0), games_per_role=4)
    assert all(r.losses == 4 and r.forfeits == 4 and r.rates()["forfeit_rate"] == 1.0 for r in records.values())


def check_or_call(observations: Sequence[str]) -> list[str]:
    return ["[check]" if "check" in o.split("Legal actions:")[1] else "[call]" for o in observations]


def test_both_seats_are_dealt_the_same_hands_and_evaluation_repeats() -> None:
    dealt: list[tuple[str, str]] = []

    def new_game(rng: random.Random) -> KuhnPoker:
        hand = KuhnPoker.new(rng)
        dealt.append(hand.cards)
        return hand

    def run() -> dict[str, Record]:
        return evaluate_against(new_game, check_or_call, KuhnEquilibrium(seed=1), games_per_role=50, seed=9)

    records = run()
    first_seat, second_seat = dealt[1:51], dealt[51:101]  # dealt[0]: the game that told the roles
    assert first_seat == second_seat and len(set(first_seat)) == 6
    assert records == run()
    assert all(r.games == 50 and r.forfeits == 0 for r in records.values())


def test_record_rates_and_metric_names() -> None:
    record = Record()
    for result, forfeited in [(1.0, False), (0.0, False), (-1.0, True), (-1.0, False)]:
        record.add(result, forfeited=forfeited)
    assert record.rates() == {
        "win_rate": 0.25,
        "draw_rate": 0.25,
        "loss_rate": 0.5,
        "forfeit_rate": 0.25,
        "mean_return": -0.25,
    }
    metrics = evaluation_metrics("tictactoe", "minimax", {"X": record})
    assert metrics["eval/tictactoe/vs_minimax/X/win_rate"] == 0.25 and len(metrics) == 5
