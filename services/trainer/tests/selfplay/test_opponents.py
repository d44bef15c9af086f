"""The fixed opponents: random play, perfect tic-tac-toe, and the Kuhn poker equilibrium."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping

import pytest
from codegym_trainer.selfplay.games import KuhnPoker, TicTacToe
from codegym_trainer.selfplay.games.base import State
from codegym_trainer.selfplay.games.kuhn_poker import DECK
from codegym_trainer.selfplay.opponents import (
    KuhnEquilibrium,
    MinimaxOpponent,
    Opponent,
    RandomOpponent,
    best_moves,
    negamax,
)


def play_out(state: State, seats: Mapping[str, Opponent]) -> State:
    while state.to_move is not None:
        state = state.apply(seats[state.to_move].choose(state))
    return state


def test_random_plays_only_legal_moves_and_follows_its_seed() -> None:
    state = TicTacToe.from_rows("XO.", "X.O", "...")
    picks = [RandomOpponent(seed).choose(state) for seed in range(50)]
    assert set(picks) == set(state.legal_moves())
    assert picks == [RandomOpponent(seed).choose(state) for seed in range(50)]


def test_perfect_play_from_the_empty_board_is_a_draw() -> None:
    assert negamax(TicTacToe().board) == 0
    final = play_out(TicTacToe(), {"X": MinimaxOpponent(1), "O": MinimaxOpponent(2)})
    assert final.returns() == {"X": 0.0, "O": 0.0}


def test_minimax_takes_a_win_rather_than_blocking() -> None:
    state = TicTacToe.from_rows("XX.", "OO.", "...")  # X to move: 3 wins, 6 only blocks
    assert best_moves(state) == ("3",)


def test_minimax_blocks_the_only_threat() -> None:
    state = TicTacToe.from_rows("XX.", ".O.", "...")  # O to move
    assert best_moves(state) == ("3",)


def test_minimax_sets_up_a_fork() -> None:
    state = TicTacToe.from_rows("X..", ".O.", "..X")  # O to move must not take a corner: X would fork
    assert set(best_moves(state)) == {"2", "4", "6", "8"}


def test_minimax_never_loses_to_random_play() -> None:
    for seed in range(150):
        for role in ("X", "O"):
            other = "O" if role == "X" else "X"
            final = play_out(TicTacToe(), {role: MinimaxOpponent(seed), other: RandomOpponent(seed)})
            assert final.returns()[role] >= 0.0, (seed, role, final.board)


def test_minimax_plays_only_tic_tac_toe() -> None:
    with pytest.raises(TypeError):
        MinimaxOpponent().choose(KuhnPoker(("J", "Q")))
    with pytest.raises(TypeError):
        KuhnEquilibrium().choose(TicTacToe())


PureStrategy = dict[tuple[str, tuple[str, ...]], str]


def expected_first_return(choose: Callable[[KuhnPoker], dict[str, float]]) -> float:
    """The first player's expected return over the six deals, ``choose`` giving each move's probability."""

    def value(state: KuhnPoker) -> float:
        if state.is_terminal:
            return state.returns()["first"]
        return sum(p * value(state.apply(move)) for move, p in choose(state).items() if p)

    deals = list(itertools.permutations(DECK, 2))
    return sum(value(KuhnPoker((a, b))) for a, b in deals) / len(deals)


def pure_strategies(role: str) -> list[PureStrategy]:
    """Every deterministic strategy of ``role``: one move per (card, betting history) it can face."""
    spots = {"first": [((), ("check", "bet")), (("check", "bet"), ("call", "fold"))]}.get(
        role, [(("check",), ("check", "bet")), (("bet",), ("call", "fold"))]
    )
    keys = [(card, history) for card in DECK for history, _ in spots]
    options = [moves for _ in DECK for _, moves in spots]
    return [dict(zip(keys, choice, strict=True)) for choice in itertools.product(*options)]


@pytest.mark.parametrize("alpha", [0.0, 1 / 6, 1 / 3])
def test_the_equilibrium_is_worth_minus_one_eighteenth_to_the_first_player(alpha: float) -> None:
    eq = KuhnEquilibrium(alpha)
    assert expected_first_return(eq.probabilities) == pytest.approx(-1 / 18, abs=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1 / 3])
def test_no_strategy_gains_against_the_equilibrium(alpha: float) -> None:
    eq = KuhnEquilibrium(alpha)
    for role in ("first", "second"):
        best = -1e9 if role == "first" else 1e9
        for strategy in pure_strategies(role):

            def mixed(state: KuhnPoker, strategy: PureStrategy = strategy, role: str = role) -> dict[str, float]:
                if state.to_move == role:
                    return {strategy[(state.card(role), state.history)]: 1.0}
                return eq.probabilities(state)

            value = expected_first_return(mixed)
            best = max(best, value) if role == "first" else min(best, value)
        assert best == pytest.approx(-1 / 18, abs=1e-12), role  # the best reply gets the game's value, no more


def test_the_equilibrium_samples_its_probabilities() -> None:
    eq = KuhnEquilibrium(seed=3)
    facing_bet_with_q = KuhnPoker(("K", "Q"), ("bet",))
    calls = Counter(eq.choose(facing_bet_with_q) for _ in range(3000))["call"]
    assert calls / 3000 == pytest.approx(1 / 3, abs=0.03)
    assert {eq.choose(KuhnPoker(("K", "Q"))) for _ in range(100)} == {"bet"}  # alpha = 1/3 always bets a K
    assert {eq.choose(KuhnPoker(("K", "J"), ("bet",))) for _ in range(100)} == {"fold"}
    with pytest.raises(ValueError):
        KuhnEquilibrium(alpha=0.5)
