"""Self-play evaluation: the policy against fixed opponents from every seat, before, during and after training.

Each evaluation plays ``games`` games per role against each fixed opponent of the game (tic-tac-toe: random
and minimax; Kuhn poker: random and the equilibrium strategy), the policy answering greedily, and logs the
win, draw, loss and forfeit rates per opponent and role (``selfplay/eval/<opponent>/<role>/win`` ...) and
the mean response length. Every answer the policy gave is written beside the metrics
(``selfplay_eval/step_NNNNN.jsonl``). Every evaluation replays the same seeded games, so two points differ
by the policy alone.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ...logs import MetricsSink
from ...progress import ProgressDisplay
from ...rollout import as_prompt
from ..arena import Record, evaluate_against
from ..games import GAMES
from ..opponents import KuhnEquilibrium, MinimaxOpponent, Opponent, RandomOpponent
from .rollout import prompt_text

log = logging.getLogger("codegym.trainer")

OPPONENTS: dict[str, dict[str, Callable[[int], Opponent]]] = {
    "tictactoe": {"random": lambda seed: RandomOpponent(seed), "minimax": lambda seed: MinimaxOpponent(seed)},
    "kuhn_poker": {"random": lambda seed: RandomOpponent(seed), "equilibrium": lambda seed: KuhnEquilibrium(seed=seed)},
}
"""The fixed opponents of each game, by the name metrics use."""


@torch.no_grad()
def greedy_answers(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    observations: Sequence[str],
    *,
    chat: bool,
    max_new_tokens: int,
    batch_size: int,
    think: bool = False,
) -> list[str]:
    """The policy's greedy answer to each observation (shown as in training, see ``prompt_text``), generated
    in left-padded batches."""
    was_training = model.training
    model.train(False)
    answers: list[str] = []
    try:
        for start in range(0, len(observations), batch_size):
            batch = [prompt_text(o, think=think) for o in observations[start : start + batch_size]]
            texts = [
                str(tokenizer.apply_chat_template(as_prompt(o, chat=True), tokenize=False, add_generation_prompt=True))
                if chat
                else o
                for o in batch
            ]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not chat)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            width = enc["input_ids"].shape[1]
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            answers.extend(str(tokenizer.decode(ids, skip_special_tokens=True)) for ids in out[:, width:])
    finally:
        model.train(was_training)
    return answers


@dataclass(frozen=True)
class SelfPlayPoint:
    """One evaluation: the policy's record per opponent and role, and its mean answer length in tokens."""

    step: int
    records: dict[str, dict[str, Record]]
    response_length: float
    seconds: float

    def metrics(self) -> dict[str, float]:
        """``selfplay/eval/<opponent>/<role>/<win|draw|loss|forfeit|return>`` and the mean response length."""
        out: dict[str, float] = {
            "selfplay/eval/response_length": self.response_length,
            "selfplay/eval/seconds": self.seconds,
        }
        names = {
            "win_rate": "win",
            "draw_rate": "draw",
            "loss_rate": "loss",
            "forfeit_rate": "forfeit",
            "mean_return": "return",
        }
        for opponent, by_role in self.records.items():
            for role, record in by_role.items():
                for key, value in record.rates().items():
                    out[f"selfplay/eval/{opponent}/{role}/{names[key]}"] = value
        return out

    def describe(self) -> str:
        """E.g. ``vs random: X 45% win 10% forfeit, O 20% win 30% forfeit; ...``."""
        parts = []
        for opponent, by_role in self.records.items():
            seats = ", ".join(
                f"{role} {r.rates()['win_rate']:.0%} win {r.rates()['forfeit_rate']:.0%} forfeit"
                for role, r in by_role.items()
            )
            parts.append(f"vs {opponent}: {seats}")
        return "; ".join(parts) + f"; {self.response_length:.1f} tokens an answer"

    def win_rates(self, opponent: str) -> str:
        """Each seat's win rate against ``opponent``, e.g. ``X 45%, O 20%``."""
        return ", ".join(f"{role} {r.rates()['win_rate']:.0%}" for role, r in self.records[opponent].items())


@dataclass
class SelfPlayEvaluator:
    """Plays the evaluation games of ``game`` and keeps the time series of its points."""

    game: str
    tokenizer: PreTrainedTokenizerBase
    games: int
    chat: bool
    max_new_tokens: int
    batch_size: int = 16
    seed: int = 0
    answers_dir: Path | None = None
    opponents: Sequence[str] | None = None  # names in OPPONENTS[game]; None: all of them
    think: bool = False  # the policy is asked to reason first, as in training
    points: list[SelfPlayPoint] = field(default_factory=list)

    def __call__(self, model: Any, step: int) -> SelfPlayPoint:
        """Evaluate ``model`` now and append the point for ``step``."""
        start = time.perf_counter()
        turns: list[dict[str, Any]] = []
        records: dict[str, dict[str, Record]] = {}
        chosen = (
            OPPONENTS[self.game] if self.opponents is None else {n: OPPONENTS[self.game][n] for n in self.opponents}
        )
        for name, make in chosen.items():

            def policy(observations: Sequence[str], opponent: str = name) -> list[str]:
                answers = greedy_answers(
                    model,
                    self.tokenizer,
                    observations,
                    chat=self.chat,
                    max_new_tokens=self.max_new_tokens,
                    batch_size=self.batch_size,
                    think=self.think,
                )
                for observation, answer in zip(observations, answers, strict=True):
                    tokens = len(self.tokenizer(answer, add_special_tokens=False)["input_ids"])
                    turns.append({"opponent": opponent, "observation": observation, "answer": answer, "tokens": tokens})
                return answers

            records[name] = evaluate_against(
                GAMES[self.game], policy, make(self.seed), games_per_role=self.games, seed=self.seed
            )
        length = sum(t["tokens"] for t in turns) / max(len(turns), 1)
        point = SelfPlayPoint(step, records, length, time.perf_counter() - start)
        if self.answers_dir is not None:
            self.answers_dir.mkdir(parents=True, exist_ok=True)
            with open(self.answers_dir / f"step_{step:05d}.jsonl", "w") as f:
                for turn in turns:
                    f.write(json.dumps({"step": step, **turn}) + "\n")
        self.points.append(point)
        return point


class SelfPlayEvalCallback(TrainerCallback):
    """Evaluates before the first step and every ``every`` steps (0: only before, and after by the run).

    With a ``display``, each evaluation shows every seat's win rate against the random opponent, the one
    every game has: the number that moves first while a policy learns to play legal moves.
    """

    def __init__(
        self, evaluator: SelfPlayEvaluator, sink: MetricsSink, *, every: int, display: ProgressDisplay | None = None
    ) -> None:
        self.evaluator = evaluator
        self.sink = sink
        self.every = every
        self.display = display

    def evaluate(self, model: Any, step: int) -> SelfPlayPoint:
        """Run the evaluation now and log it."""
        point = self.evaluator(model, step)
        self.sink.write(step, point.metrics(), kind="eval")
        if self.display is not None:
            self.display.evaluation(step, point.win_rates("random"))
        log.info("self-play evaluation at step %d: %s, %.0fs", step, point.describe(), point.seconds)
        return point

    def evaluated(self, step: int) -> bool:
        """Whether a point of ``step`` was logged."""
        return any(p.step == step for p in self.evaluator.points)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not self.evaluated(state.global_step):
            self.evaluate(kwargs["model"], state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        step = state.global_step
        if self.every and step % self.every == 0 and step < state.max_steps:
            self.evaluate(kwargs["model"], step)
