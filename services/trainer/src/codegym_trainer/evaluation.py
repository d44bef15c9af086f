"""pass@1 on held-out tasks with the policy being trained: before the first step, every N steps, at the end.

Each evaluation generates one greedy answer per task and, with ``samples``, that many sampled ones
(``temperature``), from the live policy with transformers' ``generate``; the evaluator's
``evaluate_completions`` judges them, so a training reward and an evaluation judge a program the same way.
Greedy pass@1 moves by whole problems; the sampled pass@1 (the mean of each problem's pass rate) is the
smoother estimate; the greedy one carries a Wilson interval (pass or fail per problem), the sampled one a
bootstrap interval over problems. Every answer is written beside the
metrics (``evaluations/step_NNNNN.jsonl``) so a person can read what changed between two points.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from codegym_evaluator.evaluate import EvalSummary, evaluate_completions
from codegym_evaluator.prompts import continued_answer
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task
from codegym_sandbox.verdicts import Verdict
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .config import TrainConfig
from .stats import Interval, bootstrap_interval, wilson_interval
from .tasks import prompt_of

log = logging.getLogger("codegym.trainer")


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of the time series. ``pass_at_1``, ``solved`` and ``verdicts`` are the greedy answers'."""

    step: int
    pass_at_1: float
    solved: int
    tasks: int
    sandbox_errors: int
    verdicts: dict[str, int]
    seconds: float
    interval: tuple[float, float] | None = None
    samples: int = 0
    sampled_pass_at_1: float | None = None
    sampled_interval: tuple[float, float] | None = None
    sampled_verdicts: dict[str, int] = field(default_factory=dict)
    answers: str | None = None

    def metrics(self) -> dict[str, float]:
        """The point as logged metrics."""
        out = {
            "eval/pass@1": self.pass_at_1,
            "eval/solved": float(self.solved),
            "eval/sandbox_errors": float(self.sandbox_errors),
            "eval/seconds": self.seconds,
        }
        if self.interval is not None:
            out["eval/pass@1_low"], out["eval/pass@1_high"] = self.interval
        out.update({f"eval/verdicts/{k}": float(v) for k, v in self.verdicts.items()})
        if self.sampled_pass_at_1 is not None:
            out["eval/sampled_pass@1"] = self.sampled_pass_at_1
            if self.sampled_interval is not None:
                out["eval/sampled_pass@1_low"], out["eval/sampled_pass@1_high"] = self.sampled_interval
            out.update({f"eval/sampled_verdicts/{k}": float(v) for k, v in self.sampled_verdicts.items()})
        return out

    def describe(self) -> str:
        """One line: greedy pass@1 with its interval, and the sampled one where there is one."""
        text = f"{self.pass_at_1:.3f}"
        if self.interval is not None:
            text += f" [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
        text += f" greedy ({self.solved}/{self.tasks})"
        if self.sampled_pass_at_1 is not None:
            text += f", {self.sampled_pass_at_1:.3f}"
            if self.sampled_interval is not None:
                text += f" [{self.sampled_interval[0]:.3f}, {self.sampled_interval[1]:.3f}]"
            text += f" sampled (n={self.samples})"
        return text


def _texts(tokenizer: PreTrainedTokenizerBase, batch: list[Task], chat: bool) -> list[str]:
    if chat:
        return [
            str(tokenizer.apply_chat_template(prompt_of(t, chat=True), tokenize=False, add_generation_prompt=True))
            for t in batch
        ]
    return [prompt_of(t, chat=False) for t in batch]


def _answer(prompt: str, text: Any, chat: bool) -> str:
    """The answer judged of ``text`` generated for ``prompt``: a base model's continues its prompt's open fence
    (``prompts.continued_answer``, as the reward and ``codegym-eval`` read it)."""
    return str(text) if chat else continued_answer(prompt, str(text))


@torch.no_grad()
def generate_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[Task],
    *,
    chat: bool,
    max_new_tokens: int,
    batch_size: int,
    samples: int = 0,
    temperature: float = 0.8,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, list[str]]:
    """Per task: the greedy answer first, then ``samples`` sampled ones, generated in batches (left-padded). A
    base model's answer is the block its prompt's open fence holds, up to its close (``prompts.continued_answer``).

    Sampling runs on a forked random state seeded from ``seed`` and the batch: the training run's random
    stream is left where it was, and the same policy evaluated twice gives the same answers.
    """
    was_training = model.training
    model.train(False)
    answers: dict[str, list[str]] = {}
    devices = [model.device.index or 0] if model.device.type == "cuda" else []
    try:
        for start in range(0, len(tasks), batch_size):
            batch = tasks[start : start + batch_size]
            prompts = _texts(tokenizer, batch, chat)
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=not chat)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            width = enc["input_ids"].shape[1]
            out = model.generate(  # type: ignore[operator]
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            for task, prompt, ids in zip(batch, prompts, out[:, width:], strict=True):
                answers[task.task_id] = [_answer(prompt, tokenizer.decode(ids, skip_special_tokens=True), chat)]
            if samples:
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(seed + start)
                    drawn = model.generate(  # type: ignore[operator]
                        **enc,
                        max_new_tokens=max_new_tokens,
                        do_sample=True,
                        temperature=temperature,
                        top_p=1.0,
                        top_k=0,
                        num_return_sequences=samples,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                for i, ids in enumerate(drawn[:, width:]):
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    answers[batch[i // samples].task_id].append(_answer(prompts[i // samples], text, chat))
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


def _judged(scores: list[Score]) -> list[Score]:
    return [s for s in scores if not s.sandbox_error]


def _answer_row(answer: str, score: Score) -> dict[str, Any]:
    return {"answer": answer, "verdict": score.verdict, "passed": score.passed, "total": score.total}


def write_answers(
    path: Path, step: int, tasks: list[Task], answers: dict[str, list[str]], summary: EvalSummary
) -> Path:
    """One JSON line per task: the problem, the greedy answer and each sampled one with its verdict."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for task in tasks:
            result = summary.per_task.get(task.task_id)
            if result is None:
                continue
            texts = answers[task.task_id]
            rows = [_answer_row(a, s) for a, s in zip(texts, result.scores, strict=True)]
            line = {
                "step": step,
                "task_id": task.task_id,
                "problem": task.prompt,
                "greedy": rows[0],
                "samples": rows[1:],
            }
            out.write(json.dumps(line) + "\n")
    return path


def _bounds(interval: Interval) -> tuple[float, float]:
    return (round(interval.low, 4), round(interval.high, 4))


class HeldOutEvaluator:
    """Runs the held-out evaluation, keeps its time series and writes each point's answers under ``answers_dir``."""

    def __init__(
        self,
        tasks: list[Task],
        tokenizer: PreTrainedTokenizerBase,
        make_scorer: Callable[[], Scorer],
        *,
        chat: bool,
        max_new_tokens: int,
        batch_size: int,
        samples: int = 0,
        temperature: float = 0.8,
        seed: int = 0,
        answers_dir: Path | None = None,
    ) -> None:
        self.tasks = tasks
        self.tokenizer = tokenizer
        self.make_scorer = make_scorer
        self.chat = chat
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.samples = samples
        self.temperature = temperature
        self.seed = seed
        self.answers_dir = answers_dir
        self.points: list[EvalPoint] = []

    @classmethod
    def for_run(
        cls,
        config: TrainConfig,
        tasks: list[Task],
        tokenizer: PreTrainedTokenizerBase,
        make_scorer: Callable[[], Scorer],
        answers_dir: Path,
    ) -> HeldOutEvaluator:
        """The evaluator a run's settings describe (``eval_*`` fields, the run's seed)."""
        return cls(
            tasks,
            tokenizer,
            make_scorer,
            chat=tokenizer.chat_template is not None,
            max_new_tokens=config.eval_max_new_tokens,
            batch_size=config.eval_batch_size,
            samples=config.eval_samples,
            temperature=config.eval_temperature,
            seed=config.seed,
            answers_dir=answers_dir,
        )

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
            samples=self.samples,
            temperature=self.temperature,
            seed=self.seed,
            on_batch=on_batch,
        )
        summary = score_answers(self.tasks, answers, self.make_scorer)
        point = self._point(step, summary, time.perf_counter() - start)
        if self.answers_dir is not None:
            path = write_answers(self.answers_dir / f"step_{step:05d}.jsonl", step, self.tasks, answers, summary)
            point = replace(point, answers=str(path))
        if point.sandbox_errors:
            log.warning("held-out evaluation at step %d: %d sandbox errors left out", step, point.sandbox_errors)
        self.points.append(point)
        return point

    def _point(self, step: int, summary: EvalSummary, seconds: float) -> EvalPoint:
        greedy = {tid: r.scores[0] for tid, r in summary.per_task.items()}
        judged = [float(s.verdict is Verdict.AC) for s in greedy.values() if not s.sandbox_error]
        sampled = [r.scores[1:] for r in summary.per_task.values()]
        rates = [sum(s.verdict is Verdict.AC for s in ok) / len(ok) for ok in map(_judged, sampled) if ok]
        sandbox_errors = sum(s.sandbox_error for r in summary.per_task.values() for s in r.scores)
        return EvalPoint(
            step=step,
            pass_at_1=sum(judged) / len(judged) if judged else 0.0,
            solved=int(sum(judged)),
            tasks=len(self.tasks),
            sandbox_errors=sandbox_errors,
            verdicts=dict(sorted(Counter(s.verdict for s in greedy.values()).items())),
            seconds=seconds,
            # One greedy answer per problem: pass/fail outcomes, whose honest interval is Wilson's.
            interval=_bounds(wilson_interval(int(sum(judged)), len(judged))) if judged else None,
            samples=self.samples,
            sampled_pass_at_1=sum(rates) / len(rates) if rates else None,
            sampled_interval=_bounds(bootstrap_interval(rates, seed=step)) if rates else None,
            sampled_verdicts=dict(sorted(Counter(s.verdict for group in sampled for s in group).items())),
        )
