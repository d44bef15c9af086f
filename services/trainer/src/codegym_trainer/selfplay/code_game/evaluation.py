"""The held-out output-prediction evaluation during a code-game run: before the first step, every N steps, at the end.

The policy answers each problem of ``output_prediction`` greedily, as a predictor of the game would be
asked; the accuracy is logged as ``code_game/eval/output_accuracy`` and every answer is written to
``<run>/code_game_eval/step_NNNNN.jsonl``, so a person can read what changed between two points.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from ...logs import MetricsSink
from ...progress import ProgressDisplay
from ...rollout import as_prompt
from ..arena import BatchPolicy
from .output_prediction import OutputPredictionReport, OutputProblem, score_output_predictions

log = logging.getLogger("codegym.trainer")

ACCURACY = "code_game/eval/output_accuracy"


def _templated(tokenizer: PreTrainedTokenizerBase, prompt: str) -> str:
    return str(tokenizer.apply_chat_template(as_prompt(prompt, chat=True), tokenize=False, add_generation_prompt=True))


def greedy_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, max_new_tokens: int, batch_size: int
) -> BatchPolicy:
    """The model's greedy answers to user prompts, in batches (left-padded); chat-templated when it has one."""
    chat = tokenizer.chat_template is not None

    @torch.no_grad()
    def answer(prompts: Sequence[str]) -> list[str]:
        was_training = model.training
        model.train(False)
        out: list[str] = []
        try:
            for start in range(0, len(prompts), batch_size):
                batch = list(prompts[start : start + batch_size])
                if chat:
                    batch = [_templated(tokenizer, p) for p in batch]
                enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=not chat)
                enc = {k: v.to(model.device) for k, v in enc.items()}
                width = enc["input_ids"].shape[1]
                ids = model.generate(  # type: ignore[operator]
                    **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
                )
                out += [str(tokenizer.decode(row, skip_special_tokens=True)) for row in ids[:, width:]]
        finally:
            model.train(was_training)
        return out

    return answer


class OutputPredictionEvaluator:
    """Scores a policy on the held-out problems and writes its answers under ``answers_dir``."""

    def __init__(self, problems: Sequence[OutputProblem], answers_dir: Path | None = None) -> None:
        if not problems:
            raise ValueError("the output-prediction evaluation needs at least one problem")
        self.problems = list(problems)
        self.answers_dir = answers_dir
        self.history: list[tuple[int, float]] = []

    def __call__(self, policy: BatchPolicy, step: int) -> dict[str, float]:
        """Evaluate ``policy`` now: the metrics of ``step``."""
        start = time.perf_counter()
        answers = list(policy([p.prompt() for p in self.problems]))
        report = score_output_predictions(self.problems, answers)
        if self.answers_dir is not None:
            self._write(self.answers_dir, step, answers, report)
        self.history.append((step, report.accuracy))
        return {
            ACCURACY: report.accuracy,
            "code_game/eval/output_correct": float(report.correct),
            "code_game/eval/seconds": time.perf_counter() - start,
        }

    def _write(self, folder: Path, step: int, answers: Sequence[str], report: OutputPredictionReport) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"step_{step:05d}.jsonl").open("w") as f:
            for problem, answer in zip(self.problems, answers, strict=True):
                row = {
                    "step": step,
                    "task_id": problem.task_id,
                    "program": problem.program,
                    "output": problem.output,
                    "answer": answer,
                    "correct": report.passed[problem.task_id],
                }
                f.write(json.dumps(row) + "\n")


class OutputPredictionCallback(TrainerCallback):
    """Runs the evaluation before step 1 and every ``interval`` steps (0: never in between); the run calls
    ``evaluate`` after the last step, unless it was interrupted. With a ``display``, each evaluation shows its
    accuracy there."""

    def __init__(
        self,
        evaluator: OutputPredictionEvaluator,
        sink: MetricsSink,
        tokenizer: PreTrainedTokenizerBase,
        *,
        interval: int,
        max_new_tokens: int,
        batch_size: int,
        display: ProgressDisplay | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.display = display
        self.sink = sink
        self.tokenizer = tokenizer
        self.interval = interval
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    def evaluate(self, model: Any, step: int) -> dict[str, float]:
        """Evaluate ``model`` now and log the point."""
        policy = greedy_policy(model, self.tokenizer, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size)
        metrics = self.evaluator(policy, step)
        self.sink.write(step, metrics, kind="eval")
        if self.display is not None:
            correct, total = int(metrics["code_game/eval/output_correct"]), len(self.evaluator.problems)
            self.display.evaluation(step, f"{metrics[ACCURACY]:.3f} ({correct} of {total} programs)")
        log.info("held-out output prediction at step %d: %.3f", step, metrics[ACCURACY])
        return metrics

    def evaluated(self, step: int) -> bool:
        """Whether a point of ``step`` was logged."""
        return any(s == step for s, _ in self.evaluator.history)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self.evaluated(state.global_step):
            self.evaluate(kwargs["model"], state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.interval and state.global_step % self.interval == 0 and not self.evaluated(state.global_step):
            self.evaluate(kwargs["model"], state.global_step)
