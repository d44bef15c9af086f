"""The code-output game: a writer writes a program, predictors guess its output, the sandbox runs it.

``rules``: a round's rules and rewards (``program_check`` rejects what may not be played); ``program_runner``
and ``rounds``: playing rounds (programs run twice in the sandbox, predictions from the policy or a frozen
opponent); ``rollout``: a step's rounds as samples; ``output_prediction`` and ``evaluation``: the held-out
output-prediction set and its evaluation; ``run``: ``codegym-train --task code-game``.
"""

from __future__ import annotations

from .output_prediction import OutputProblem, load_output_problems, score_output_predictions
from .program_check import check_program
from .program_runner import GameLimits, ProgramRunner
from .rounds import OpponentPredictor, PlayedRound, play_rounds
from .rules import RoundResult, WriterAnswer, normalise_output, parse_prediction, parse_writer, score_round

__all__ = [
    "GameLimits",
    "OpponentPredictor",
    "OutputProblem",
    "PlayedRound",
    "ProgramRunner",
    "RoundResult",
    "WriterAnswer",
    "check_program",
    "load_output_problems",
    "normalise_output",
    "parse_prediction",
    "parse_writer",
    "play_rounds",
    "score_output_predictions",
    "score_round",
]
