"""What every self-play game offers: the ``GameState`` protocol, and reading a move out of a model's text.

A state is immutable: ``apply`` returns the next one, so opponents can search and memoise and a rollout can
keep every position it saw. Games are for two roles taking turns; chance (a deal) happens when the game is
created, from a seeded ``random.Random``, so a game is reproducible from its seed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol, TypeVar


class IllegalMove(ValueError):
    """``apply`` was given a move that is not legal in the position (``play`` turns these into a forfeit)."""

    def __init__(self, move: str, legal: tuple[str, ...]) -> None:
        super().__init__(f"illegal move {move!r}; legal: {', '.join(legal) or 'none (the game is over)'}")
        self.move = move
        self.legal = legal


State = TypeVar("State", bound="GameState")


class GameState(Protocol):
    """One position of a two-role, turn-based game."""

    @property
    def game(self) -> str:
        """The game's name, the first half of a role's baseline key."""
        ...

    @property
    def roles(self) -> tuple[str, ...]:
        """Every role, in turn order of the first round."""
        ...

    @property
    def to_move(self) -> str | None:
        """The role whose turn it is; None once the game is over."""
        ...

    @property
    def is_terminal(self) -> bool:
        """Whether the game is over."""
        ...

    @property
    def forfeited_by(self) -> str | None:
        """The role that lost by an unparsable or illegal move, if the game ended that way."""
        ...

    def observation(self, role: str) -> str:
        """The prompt text for ``role``: the rules, what this role may see, its legal moves and the answer format."""
        ...

    def legal_moves(self) -> tuple[str, ...]:
        """The moves the role to move may make, in their canonical spelling; empty once the game is over."""
        ...

    def parse_move(self, text: str) -> str | None:
        """The move a model's answer names (canonical spelling, legal or not), or None if it names none."""
        ...

    def apply(self: State, move: str) -> State:
        """The position after a legal ``move`` by the role to move; raises ``IllegalMove`` otherwise."""
        ...

    def forfeit(self: State) -> State:
        """The finished game in which the role to move has lost by an illegal move."""
        ...

    def returns(self) -> Mapping[str, float]:
        """Each role's return; only once the game is over."""
        ...


def play(state: State, text: str) -> State:
    """The position after the role to move answers ``text``: an unparsable or illegal move loses at once.

    Losing at once, rather than asking again, is what teaches the format: a retry would make a malformed
    answer free.
    """
    if state.is_terminal:
        raise IllegalMove(text, ())
    move = state.parse_move(text)
    if move is None or move not in state.legal_moves():
        return state.forfeit()
    return state.apply(move)


def find_move(text: str, token: str) -> str | None:
    """The move token a model's answer names: the last ``[token]`` in brackets, else the only token in the text.

    ``token`` is a regular expression for one move (no groups). Brackets win because a model that reasons
    first mentions many moves and then answers; without brackets the answer counts only when it names one
    distinct move, so "I play 5" is 5 and "5 or 7" is nothing. Matching ignores case.

    >>> find_move("Blocking the column: [7]", r"\\d+")
    '7'
    >>> find_move("I play 5 because 3 is taken", r"\\d+") is None
    True
    """
    bracketed = re.findall(rf"\[\s*({token})\s*\]", text, flags=re.IGNORECASE)
    if bracketed:
        return str(bracketed[-1]).lower()
    bare = {m.lower() for m in re.findall(rf"(?<![\w.])(?:{token})(?![\w]|\.\d)", text, flags=re.IGNORECASE)}
    return bare.pop() if len(bare) == 1 else None
