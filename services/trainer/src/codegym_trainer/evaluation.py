"""pass@1 on held-out tasks with the policy being trained: before the first step, every N steps, at the end.

Answers are generated greedily with transformers' ``generate`` from the live policy and judged by the
evaluator's ``evaluate_completions``, so a training reward and an evaluation judge a program the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from codegym_evaluator.evaluate import EvalSummary, evaluate_completions
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .tasks import prompt_of

log = logging.getLogger("codegym.trainer")


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of the time series."""

    step: int
    pass_at_1: float
    solved: int
    tasks: int
    sandbox_errors: int
    verdicts: dict[str, int]
    seconds: float

    def metrics(self) -> dict[str, float]:
        """The point as logged metrics."""
        out = {
            "eval/pass@1": self.pass_at_1,
            "eval/solved": float(self.solved),
            "eval/sandbox_errors": float(self.sandbox_errors),
            "eval/seconds": self.seconds,
        }
        out.update({f"eval/verdicts/{k}": float(v) for k, v in self.verdicts.items()})
        return out


@torch.no_grad()
def generate_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[Task],
    *,
    chat: bool,
    max_new_tokens: int,
    batch_size: int,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, list[str]]:
    """One greedy answer per task, generated in batches (left-padded)."""
    was_training = model.training
    model.train(False)
    answers: dict[str, list[str]] = {}
    try:
        for start in range(0, len(tasks), batch_size):
            batch = tasks[start : start + batch_size]
            if chat:
                texts = [
                    str(
                        tokenizer.apply_chat_template(
                            prompt_of(t, chat=True), tokenize=False, add_generation_prompt=True
                        )
                    )
                    for t in batch
                ]
            else:
                texts = [prompt_of(t, chat=False) for t in batch]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not chat)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            out = model.generate(  # type: ignore[operator]
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
            new = out[:, enc["input_ids"].shape[1] :]
            for task, ids in zip(batch, new, strict=True):
                answers[task.task_id] = [str(tokenizer.decode(ids, skip_special_tokens=True))]
            if on_batch is not None:
                on_batch(len(batch))
    finally:
        model.train(was_training)
    return answers


def score_answers(tasks: list[Task], answers: dict[str, list[str]], make_scorer: Callable[[], Scorer]) -> EvalSummary:
    """Judge the answers through the sandbox (a scorer of its own, on an event loop of its own)."""

    async def judge() -> EvalSummary:
        async with make_scorer() as scorer:
            return await evaluate_completions(tasks, answers, scorer, ks=(1,))

    return asyncio.run(judge())


class HeldOutEvaluator:
    """Runs the held-out evaluation and keeps its time series."""

    def __init__(
        self,
        tasks: list[Task],
        tokenizer: PreTrainedTokenizerBase,
        make_scorer: Callable[[], Scorer],
        *,
        chat: bool,
        max_new_tokens: int,
        batch_size: int,
    ) -> None:
        self.tasks = tasks
        self.tokenizer = tokenizer
        self.make_scorer = make_scorer
        self.chat = chat
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.points: list[EvalPoint] = []

    def __call__(self, model: Any, step: int, on_batch: Callable[[int], None] | None = None) -> EvalPoint:
        """Evaluate ``model`` now and append the point for ``step``."""
        start = time.perf_counter()
        answers = generate_answers(
            model,
            self.tokenizer,
            self.tasks,
            chat=self.chat,
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            on_batch=on_batch,
        )
        summary = score_answers(self.tasks, answers, self.make_scorer)
        solved = sum(r.correct for r in summary.per_task.values())
        point = EvalPoint(
            step=step,
            pass_at_1=summary.pass_at_k.get(1, 0.0),
            solved=solved,
            tasks=len(self.tasks),
            sandbox_errors=summary.sandbox_errors,
            verdicts=dict(summary.verdict_counts),
            seconds=time.perf_counter() - start,
        )
        if point.sandbox_errors:
            log.warning("held-out evaluation at step %d: %d sandbox errors left out", step, point.sandbox_errors)
        self.points.append(point)
        return point
