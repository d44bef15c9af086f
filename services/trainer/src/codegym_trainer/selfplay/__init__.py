"""Self-play: two-role games (tic-tac-toe, Kuhn poker) with role-conditioned advantages, and the code-output game.

``games``: the game engines; ``opponents``: fixed players; ``arena``: playing batches of games and evaluating
a policy against an opponent; ``advantage``: per-(game, role) baselines; ``program_check`` and ``code_game``:
the writer/predictor game's rules and rewards; ``program_runner`` and ``code_game_round``: playing its rounds
(programs run twice in the sandbox, predictions from the policy or a frozen opponent); ``output_prediction``:
its held-out evaluation.
"""

from __future__ import annotations

from .advantage import RoleBaselines, RoleConditionedAdvantage, merge_return_sums
from .arena import Episode, Record, evaluate_against, play_games
from .code_game import RoundResult, WriterAnswer, normalise_output, parse_prediction, parse_writer, score_round
from .code_game_round import OpponentPredictor, PlayedRound, play_rounds
from .games import GAMES, GameState, KuhnPoker, TicTacToe, play
from .opponents import KuhnEquilibrium, MinimaxOpponent, Opponent, RandomOpponent
from .output_prediction import OutputProblem, load_output_problems, score_output_predictions
from .program_check import check_program
from .program_runner import GameLimits, ProgramRunner

__all__ = [
    "GAMES",
    "Episode",
    "GameLimits",
    "GameState",
    "KuhnEquilibrium",
    "KuhnPoker",
    "MinimaxOpponent",
    "Opponent",
    "OpponentPredictor",
    "OutputProblem",
    "PlayedRound",
    "ProgramRunner",
    "RandomOpponent",
    "Record",
    "RoleBaselines",
    "RoleConditionedAdvantage",
    "RoundResult",
    "TicTacToe",
    "WriterAnswer",
    "check_program",
    "evaluate_against",
    "load_output_problems",
    "merge_return_sums",
    "normalise_output",
    "parse_prediction",
    "parse_writer",
    "play",
    "play_games",
    "play_rounds",
    "score_output_predictions",
    "score_round",
]
