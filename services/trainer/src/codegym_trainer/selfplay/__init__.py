"""Self-play: two-role games (tic-tac-toe, Kuhn poker) with role-conditioned advantages, and the code-output game.

Shared by the games: ``games``: the two-role game engines; ``opponents``: fixed players; ``arena``: playing
batches of games and evaluating a policy against an opponent; ``advantage``: per-(game, role) baselines;
``training``: what a self-play run adds to the run's lifecycle (baselines saved with checkpoints).
Each game in its package: ``spiral`` (self-play of the two-role games) and ``code_game`` (writers against
predictors of a program's output).
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
