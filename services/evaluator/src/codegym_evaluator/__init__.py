"""codegym's evaluator: tasks, code extraction, scoring through the sandbox, pass@k and model evaluation.

The trainer imports the same scoring library, so a reward and an evaluation judge a program the same way.
"""

from __future__ import annotations

from .blocking import BlockingScorer
from .evaluate import EvalSummary, TaskResult, evaluate_completions
from .extract import Extracted, extract_code
from .passk import pass_at_k
from .scoring import RunOutput, Score, Scorer
from .tasks import Task, load_tasks

__all__ = [
    "BlockingScorer",
    "EvalSummary",
    "Extracted",
    "RunOutput",
    "Score",
    "Scorer",
    "Task",
    "TaskResult",
    "evaluate_completions",
    "extract_code",
    "load_tasks",
    "pass_at_k",
]
