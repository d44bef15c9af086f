"""The held-out output-prediction evaluation (CRUXEval-style): read a program, give its exact output.

The problems are the project's own (``data/output_prediction.jsonl``): short deterministic programs, each
with the output it prints, asked and judged as the code-output game asks and judges its predictors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...data import DATA_DIR
from .rules import normalise_output, parse_prediction, predictor_prompt

OUTPUT_PREDICTION_FILE = DATA_DIR / "output_prediction.jsonl"


@dataclass(frozen=True)
class OutputProblem:
    """A program and the exact output it prints."""

    task_id: str
    program: str
    output: str

    def prompt(self) -> str:
        """The predictor's prompt for this program."""
        return predictor_prompt(self.program)


def load_output_problems(path: Path = OUTPUT_PREDICTION_FILE) -> list[OutputProblem]:
    """The problems of a JSONL file of ``{"task_id", "program", "output"}`` objects."""
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            try:
                problems.append(OutputProblem(str(row["task_id"]), str(row["program"]), str(row["output"])))
            except KeyError as exc:
                raise ValueError(f"{path}:{number}: no {exc.args[0]!r}") from exc
    return problems


@dataclass
class OutputPredictionReport:
    """How many programs' outputs were predicted exactly, and which."""

    correct: int
    total: int
    passed: dict[str, bool] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score_output_predictions(problems: Sequence[OutputProblem], completions: Sequence[str]) -> OutputPredictionReport:
    """Each completion judged against its problem's output: the last ```output block, after normalising.

    >>> problem = OutputProblem("t", "print(1 + 1)", "2\\n")
    >>> score_output_predictions([problem], ["It adds.\\n```output\\n2\\n```"]).accuracy
    1.0
    """
    if len(problems) != len(completions):
        raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
    passed = {}
    for problem, completion in zip(problems, completions, strict=True):
        prediction = parse_prediction(completion)
        passed[problem.task_id] = prediction is not None and normalise_output(prediction) == normalise_output(
            problem.output
        )
    return OutputPredictionReport(correct=sum(passed.values()), total=len(problems), passed=passed)
