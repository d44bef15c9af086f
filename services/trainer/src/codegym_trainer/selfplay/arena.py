"""Playing games to the end: self-play between two roles of one policy, and evaluation against fixed opponents.

Games advance together in rounds: fixed opponents move at once, then one call of the policy answers every
game that waits for it, the way a batched generator (vLLM, ``model.generate``) wants its prompts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .games.base import GameState, play
from .opponents import Opponent

BatchPolicy = Callable[[Sequence[str]], Sequence[str]]
"""Observations in, the model's answers out, in the same order."""


@dataclass(frozen=True)
class Turn:
    """One answer of the policy: the role it played, the prompt it saw, and what it wrote."""

    role: str
    observation: str
    answer: str


@dataclass(frozen=True)
class Episode:
    """A finished game and the policy's turns in it, in order (the opponents' moves are in the observations)."""

    final: GameState
    turns: tuple[Turn, ...]

    @property
    def game(self) -> str:
        return self.final.game

    @property
    def returns(self) -> Mapping[str, float]:
        return self.final.returns()


def play_games(
    starts: Sequence[GameState], policy: BatchPolicy, opponents: Sequence[Mapping[str, Opponent]] | None = None
) -> list[Episode]:
    """Play every game in ``starts`` to its end.

    ``opponents[i]`` seats fixed players in game ``i`` by role; the policy plays every other role, so without
    ``opponents`` it plays both sides (self-play). An unparsable or illegal answer ends its game (``play``).
    """
    seats: Sequence[Mapping[str, Opponent]] = opponents if opponents is not None else [{} for _ in starts]
    if len(seats) != len(starts):
        raise ValueError(f"{len(starts)} games but {len(seats)} seatings")
    states = list(starts)
    turns: list[list[Turn]] = [[] for _ in starts]
    while True:
        waiting: list[tuple[int, str]] = []
        for i, seating in enumerate(seats):
            state = states[i]
            while state.to_move is not None and state.to_move in seating:
                state = state.apply(seating[state.to_move].choose(state))
            states[i] = state
            if state.to_move is not None:
                waiting.append((i, state.to_move))
        if not waiting:
            break
        observations = [states[i].observation(role) for i, role in waiting]
        answers = policy(observations)
        if len(answers) != len(observations):
            raise ValueError(f"the policy answered {len(answers)} of {len(observations)} positions")
        for (i, role), observation, answer in zip(waiting, observations, answers, strict=True):
            turns[i].append(Turn(role, observation, answer))
            states[i] = play(states[i], answer)
    return [Episode(state, tuple(t)) for state, t in zip(states, turns, strict=True)]


@dataclass
class Record:
    """The policy's results in one role: a win is a positive return, a loss a negative one."""

    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: int = 0  # losses by an unparsable or illegal answer, counted in losses too
    total_return: float = 0.0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def add(self, result: float, *, forfeited: bool) -> None:
        """Count one finished game."""
        self.total_return += result
        self.forfeits += forfeited
        if result > 0:
            self.wins += 1
        elif result < 0:
            self.losses += 1
        else:
            self.draws += 1

    def rates(self) -> dict[str, float]:
        """Win, draw, loss and forfeit rates, and the mean return."""
        n = max(self.games, 1)
        return {
            "win_rate": self.wins / n,
            "draw_rate": self.draws / n,
            "loss_rate": self.losses / n,
            "forfeit_rate": self.forfeits / n,
            "mean_return": self.total_return / n,
        }


def evaluate_against(
    new_game: Callable[[random.Random], GameState],
    policy: BatchPolicy,
    opponent: Opponent,
    *,
    games_per_role: int,
    seed: int = 0,
) -> dict[str, Record]:
    """The policy's record in each role against ``opponent``, over ``games_per_role`` games per role.

    Every role is dealt the same ``games_per_role`` games (the same seed), so in a game of chance a role's
    record differs from another's by the seat, not by the cards.
    """
    roles = new_game(random.Random(seed)).roles
    starts: list[GameState] = []
    seatings: list[Mapping[str, Opponent]] = []
    played: list[str] = []
    for role in roles:
        deals = random.Random(seed)
        for _ in range(games_per_role):
            start = new_game(deals)
            starts.append(start)
            seatings.append({other: opponent for other in roles if other != role})
            played.append(role)
    records = {role: Record() for role in roles}
    for episode, role in zip(play_games(starts, policy, seatings), played, strict=True):
        records[role].add(episode.returns[role], forfeited=episode.final.forfeited_by == role)
    return records


def evaluation_metrics(game: str, opponent: str, records: Mapping[str, Record]) -> dict[str, float]:
    """Flat metrics for a logger: ``eval/<game>/vs_<opponent>/<role>/<rate>``."""
    return {
        f"eval/{game}/vs_{opponent}/{role}/{key}": value
        for role, record in records.items()
        for key, value in record.rates().items()
    }
