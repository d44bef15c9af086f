"""Self-play: two-role games (tic-tac-toe, Kuhn poker) played by one policy, and fixed opponents to measure it.

``games``: the game engines; ``opponents``: fixed players; ``arena``: playing batches of games and evaluating
a policy against an opponent.
"""

from __future__ import annotations

from .arena import Episode, Record, evaluate_against, play_games
from .games import GAMES, GameState, KuhnPoker, TicTacToe, play
from .opponents import KuhnEquilibrium, MinimaxOpponent, Opponent, RandomOpponent

__all__ = [
    "GAMES",
    "Episode",
    "GameState",
    "KuhnEquilibrium",
    "KuhnPoker",
    "MinimaxOpponent",
    "Opponent",
    "RandomOpponent",
    "Record",
    "TicTacToe",
    "evaluate_against",
    "play",
    "play_games",
]
