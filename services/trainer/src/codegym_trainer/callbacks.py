"""The trainer callback that ties a run together: metrics to their sinks, the display, interval evaluations."""

from __future__ import annotations

import logging
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from .evaluation import EvalPoint, HeldOutEvaluator
from .logs import MetricsSink
from .progress import ProgressDisplay

log = logging.getLogger("codegym.trainer")


class RunCallback(TrainerCallback):
    """Logs every step to the sinks and the display; evaluates held-out pass@1 before step 1 and every N steps."""

    def __init__(
        self,
        sink: MetricsSink,
        display: ProgressDisplay,
        evaluator: HeldOutEvaluator | None,
        *,
        eval_interval: int,
    ) -> None:
        self.sink = sink
        self.display = display
        self.evaluator = evaluator
        self.eval_interval = eval_interval

    def evaluate(self, model: Any, step: int) -> EvalPoint | None:
        """Run the held-out evaluation now and log it."""
        if self.evaluator is None:
            return None
        point = self.evaluator(model, step)
        self.sink.write(step, point.metrics(), kind="eval")
        self.display.evaluation(step, point.describe())
        log.info("held-out pass@1 at step %d: %s, %.0fs", step, point.describe(), point.seconds)
        return point

    def evaluated(self, step: int) -> bool:
        """Whether a held-out point of ``step`` was logged (with no evaluator there is none to log)."""
        return self.evaluator is None or any(p.step == step for p in self.evaluator.points)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.display.start(state.global_step)
        if not self.evaluated(state.global_step):
            self.evaluate(kwargs["model"], state.global_step)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not logs or "train_runtime" in logs:
            return
        self.sink.write(state.global_step, logs)
        self.display.step(state.global_step, logs)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        step = state.global_step
        if self.eval_interval and step % self.eval_interval == 0 and step < state.max_steps:
            self.evaluate(kwargs["model"], step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.display.stop()
