"""Kuhn poker: three cards (J < Q < K), one card each, one betting round.

Both players ante 1 chip. The first player checks or bets 1. After a check the second player checks (showdown)
or bets 1; facing a bet a player calls (showdown) or folds (the bettor takes the pot). At a showdown the
higher card takes the pot. A role's return is the chips it won or lost: +-1 for a checked-down or folded
hand, +-2 for a called bet. An unparsable or illegal answer loses at once, and costs -2, the most a hand
can lose, so that no answer is ever cheaper than playing.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from .base import IllegalMove, find_move

NAME = "kuhn_poker"
ROLES = ("first", "second")
DECK = ("J", "Q", "K")
RANK = {card: i for i, card in enumerate(DECK)}
FORFEIT_COST = 2.0

# The legal moves after each betting history; a history not listed here is over.
_LEGAL: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("check", "bet"),
    ("check",): ("check", "bet"),
    ("bet",): ("call", "fold"),
    ("check", "bet"): ("call", "fold"),
}
_ACTION = r"check|bet|call|fold"

RULES = (
    "You are playing Kuhn poker as the {role} player. The deck has three cards, J < Q < K. Each player antes "
    "1 chip and is dealt one card; the third card is not used. The first player checks or bets 1 chip. After a "
    "check, the second player checks (showdown) or bets 1 chip. Facing a bet, a player calls (showdown) or "
    "folds (the bettor takes the pot). At a showdown the higher card takes the pot. An action that is not "
    "legal, or no action at all, loses 2 chips at once."
)


@dataclass(frozen=True)
class KuhnPoker:
    """A hand of Kuhn poker: the two dealt cards (first player's, second's) and the actions so far."""

    cards: tuple[str, str]
    history: tuple[str, ...] = ()
    forfeited_by: str | None = None

    def __post_init__(self) -> None:
        if len(self.cards) != 2 or self.cards[0] == self.cards[1] or any(c not in DECK for c in self.cards):
            raise ValueError(f"not a Kuhn poker deal: {self.cards!r}")

    @classmethod
    def new(cls, rng: random.Random) -> KuhnPoker:
        """A hand dealt from a shuffled deck."""
        first, second = rng.sample(DECK, 2)
        return cls((first, second))

    @property
    def game(self) -> str:
        return NAME

    @property
    def roles(self) -> tuple[str, ...]:
        return ROLES

    @property
    def is_terminal(self) -> bool:
        return self.forfeited_by is not None or self.history not in _LEGAL

    @property
    def to_move(self) -> str | None:
        if self.is_terminal:
            return None
        return ROLES[len(self.history) % 2]

    def card(self, role: str) -> str:
        """The card dealt to ``role``."""
        return self.cards[ROLES.index(role)]

    def legal_moves(self) -> tuple[str, ...]:
        return () if self.is_terminal else _LEGAL[self.history]

    def parse_move(self, text: str) -> str | None:
        """An action: the last one in brackets (``[bet]``), else the only action word in the text."""
        return find_move(text, _ACTION)

    def apply(self, move: str) -> KuhnPoker:
        legal = self.legal_moves()
        if move not in legal:
            raise IllegalMove(move, legal)
        return KuhnPoker(self.cards, (*self.history, move))

    def forfeit(self) -> KuhnPoker:
        if self.to_move is None:
            raise IllegalMove("forfeit", ())
        return KuhnPoker(self.cards, self.history, forfeited_by=self.to_move)

    def pot(self) -> int:
        """Chips in the pot: the antes and every bet and call."""
        return 2 + sum(1 for action in self.history if action in ("bet", "call"))

    def returns(self) -> Mapping[str, float]:
        if not self.is_terminal:
            raise ValueError("the hand is not over")
        if self.forfeited_by is not None:
            return {role: -FORFEIT_COST if role == self.forfeited_by else FORFEIT_COST for role in ROLES}
        if self.history[-1] == "fold":
            loser = ROLES[(len(self.history) - 1) % 2]
            stake = 1.0  # the folder's ante: the bet it would not call goes back to the bettor
        else:
            loser = ROLES[1] if RANK[self.cards[0]] > RANK[self.cards[1]] else ROLES[0]
            stake = self.pot() / 2
        return {role: -stake if role == loser else stake for role in ROLES}

    def describe_history(self) -> str:
        """The actions so far, in words."""
        if not self.history:
            return "none yet"
        return ", ".join(f"{ROLES[i % 2]} player {action}s" for i, action in enumerate(self.history))

    def observation(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"no role {role!r} in Kuhn poker")
        head = (
            f"{RULES.format(role=role)}\n\nYour card: {self.card(role)}.\n"
            f"Actions so far: {self.describe_history()}.\nPot: {self.pot()} chips.\n\n"
        )
        if self.is_terminal:
            return head + "The hand is over."
        if self.to_move != role:
            return head + f"Waiting for the {self.to_move} player."
        legal = self.legal_moves()
        answer = f"Answer with the action in brackets, e.g. [{legal[0]}]."
        return head + f"Your move. Legal actions: {', '.join(legal)}. {answer}"
