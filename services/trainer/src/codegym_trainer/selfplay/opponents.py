"""Fixed opponents to measure a policy against: random play, perfect tic-tac-toe, and a Kuhn poker equilibrium.

Each takes a seed, so an evaluation is the same games every time it is run.
"""

from __future__ import annotations

import functools
import random
from typing import Protocol

from .games.base import GameState
from .games.kuhn_poker import KuhnPoker
from .games.tictactoe import EMPTY, TicTacToe, winner


class Opponent(Protocol):
    """A fixed player: a legal move for the role to move."""

    @property
    def name(self) -> str:
        """How evaluation metrics name this opponent."""
        ...

    def choose(self, state: GameState) -> str:
        """A legal move in ``state``, which must not be over."""
        ...


class RandomOpponent:
    """Any legal move, uniformly."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def choose(self, state: GameState) -> str:
        return self.rng.choice(state.legal_moves())


@functools.cache
def negamax(board: tuple[str, ...]) -> int:
    """The value of a tic-tac-toe position for the side to move under perfect play.

    Positive wins, negative loses, 0 draws; a win is worth 1 plus the cells still empty, so quicker wins
    score higher and the loser delays. Memoised: there are fewer than 6,000 reachable positions.
    """
    empties = board.count(EMPTY)
    if winner(board) is not None:
        return -(1 + empties)  # the side that just moved has won
    if empties == 0:
        return 0
    position = TicTacToe(board)
    return max(-negamax(position.apply(move).board) for move in position.legal_moves())


def best_moves(state: TicTacToe) -> tuple[str, ...]:
    """Every move that keeps the best value for the side to move."""
    scored = {move: -negamax(state.apply(move).board) for move in state.legal_moves()}
    best = max(scored.values())
    return tuple(move for move, score in scored.items() if score == best)


class MinimaxOpponent:
    """Perfect tic-tac-toe: it never loses, takes the quickest win, and breaks ties between best moves at random."""

    name = "minimax"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def choose(self, state: GameState) -> str:
        if not isinstance(state, TicTacToe):
            raise TypeError(f"minimax plays tic-tac-toe, not {state.game}")
        return self.rng.choice(best_moves(state))


class KuhnEquilibrium:
    """A Nash equilibrium of Kuhn poker (Kuhn, 1950), one of the family with bluffing rate ``alpha`` in [0, 1/3].

    First player: with J, bet with probability alpha, else check and fold to a bet; with Q, check, and call a
    bet with probability alpha + 1/3; with K, bet with probability 3 * alpha, else check and call.
    Second player: with K, bet after a check and call a bet; with Q, check after a check and call a bet with
    probability 1/3; with J, bet after a check with probability 1/3 (a bluff) and fold to a bet.
    Against it no strategy gains; the first player's expected return is -1/18 whatever alpha is. The default
    alpha = 1/3 always bets a K.
    """

    name = "kuhn_equilibrium"

    def __init__(self, alpha: float = 1 / 3, seed: int = 0) -> None:
        if not 0.0 <= alpha <= 1 / 3:
            raise ValueError(f"alpha must lie in [0, 1/3], not {alpha}")
        self.alpha = alpha
        self.rng = random.Random(seed)

    def aggression(self, state: KuhnPoker) -> float:
        """The probability of the aggressive move (bet, or call facing a bet) for the player to move."""
        role = state.to_move
        if role is None:
            raise ValueError("the hand is over")
        card, a = state.card(role), self.alpha
        table: dict[tuple[str, ...], dict[str, float]] = {
            (): {"J": a, "Q": 0.0, "K": 3 * a},
            ("check", "bet"): {"J": 0.0, "Q": a + 1 / 3, "K": 1.0},
            ("check",): {"J": 1 / 3, "Q": 0.0, "K": 1.0},
            ("bet",): {"J": 0.0, "Q": 1 / 3, "K": 1.0},
        }
        return table[state.history][card]

    def probabilities(self, state: KuhnPoker) -> dict[str, float]:
        """Each legal move's probability in ``state``."""
        p = self.aggression(state)
        if state.legal_moves() == ("check", "bet"):
            return {"bet": p, "check": 1.0 - p}
        return {"call": p, "fold": 1.0 - p}

    def choose(self, state: GameState) -> str:
        if not isinstance(state, KuhnPoker):
            raise TypeError(f"this strategy plays Kuhn poker, not {state.game}")
        aggressive, passive = self.probabilities(state)
        return aggressive if self.rng.random() < self.aggression(state) else passive
