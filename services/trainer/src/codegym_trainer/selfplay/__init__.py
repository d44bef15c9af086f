"""Self-play: two-role games (tic-tac-toe, Kuhn poker) played by one policy, with role-conditioned advantages.

``games``: the game engines; ``opponents``: fixed players; ``arena``: playing batches of games and evaluating
a policy against an opponent; ``advantage``: per-(game, role) baselines.
"""

from __future__ import annotations

from .advantage import RoleBaselines, RoleConditionedAdvantage, merge_return_sums
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
    "RoleBaselines",
    "RoleConditionedAdvantage",
    "TicTacToe",
    "evaluate_against",
    "merge_return_sums",
    "play",
    "play_games",
]
