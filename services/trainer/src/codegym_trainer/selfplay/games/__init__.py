"""Two-role, turn-based games for self-play, each a ``GameState`` engine that checks every move."""

from __future__ import annotations

import random
from collections.abc import Callable

from .base import GameState, IllegalMove, find_move, play
from .kuhn_poker import KuhnPoker
from .tictactoe import TicTacToe

# A new game from a seeded random source (the deal, for games with chance), by name.
GAMES: dict[str, Callable[[random.Random], GameState]] = {
    "tictactoe": TicTacToe.new,
    "kuhn_poker": KuhnPoker.new,
}

__all__ = ["GAMES", "GameState", "IllegalMove", "KuhnPoker", "TicTacToe", "find_move", "play"]
