"""The code-output game on the trainer's seam: a step's rollout of writers (and, in self-play, predictors).

Each training step (``CodeGameRollout``):

1. the policy writes ``programs_per_step`` programs (TRL's dataset rows only pace the steps);
2. ``play_rounds`` judges them in the run's sandbox (the seam's ``context.sandbox``) and asks for ``M``
   predictions of each program with an output: in self-play the policy answers the predictor prompts in the
   same step, and those answers become predictor samples of the batch; against a frozen opponent the opponent
   answers and only writers learn;
3. the samples carry their role as their group, ``("code-game", "writer")`` or ``("code-game", "predictor")``,
   so ``CodeGameAdvantage`` gives each role its own baseline: a writer's reward lies in [-1.5, 1], a predictor's
   in {0, 1}, and one role's returns must not set the other's baseline.

A writer whose program the sandbox could not judge has a masked reward (None: advantage 0).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from datasets import Dataset

from ...rollout import Generation, Rollout, TrainerContext, as_prompt
from ..advantage import RoleAdvantage, RoleKey
from .program_runner import GameLimits, ProgramRunner
from .rounds import PlayedRound, Predict, play_rounds
from .rules import WRITER_PROMPT, predictor_prompt, round_metrics

GAME = "code-game"
WRITER: RoleKey = (GAME, "writer")
PREDICTOR: RoleKey = (GAME, "predictor")

FILLER_PROGRAM = "print(1)"  # what a process with nothing to predict asks, to generate in step with the others


def writer_dataset(rows: int, *, chat: bool) -> Dataset:
    """The training dataset of the game: ``rows`` copies of the writer's prompt, which only pace TRL's sampler."""
    return Dataset.from_list([{"prompt": as_prompt(WRITER_PROMPT, chat=chat)} for _ in range(rows)])


class CodeGameRollout:
    """The seam's rollout function of the code-output game: ``programs_per_step`` rounds per step and process.

    ``chat``: the policy is prompted with chat messages (it has a chat template), else with the text.
    ``opponent``: a frozen predictor (``OpponentPredictor``); None means self-play, the policy predicting.
    ``limits``: of each run of a program; the programs run in the context's sandbox, through a runner per step.
    """

    def __init__(
        self,
        *,
        programs_per_step: int,
        predictions_per_program: int,
        chat: bool,
        opponent: Predict | None = None,
        limits: GameLimits = GameLimits(),
    ) -> None:
        if programs_per_step < 1 or predictions_per_program < 1:
            raise ValueError("a step needs at least one program, and a round at least one prediction")
        self.limits = limits
        self.programs_per_step = programs_per_step
        self.chat = chat
        self.predictions_per_program = predictions_per_program
        self.opponent = opponent
        self.rounds: list[PlayedRound] = []  # the last step's, for a test or a reader

    def __call__(self, context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout:
        chat = self.chat
        prompts = [as_prompt(WRITER_PROMPT, chat=chat)] * self.programs_per_step
        writers = context.generate(prompts, repeats=len(prompts))
        asked: list[Any] = []
        answered: list[Generation] = []

        def self_play(programs_prompts: Sequence[str], m: int) -> list[list[str]]:
            asked.extend(as_prompt(p, chat=chat) for p in programs_prompts for _ in range(m))
            if not context.any_process(bool(asked)):
                return []
            filler = [as_prompt(predictor_prompt(FILLER_PROGRAM), chat=chat)] * m
            generation = context.generate(asked or filler, repeats=m)
            if not asked:
                return []  # the filler's answers are thrown away
            answered.append(generation)
            texts = generation.texts
            return [texts[i : i + m] for i in range(0, len(texts), m)]

        predict = self.opponent if self.opponent is not None else self_play
        with ProgramRunner(context.sandbox, limits=self.limits) as runner:
            rounds = play_rounds(writers.texts, runner, predict, self.predictions_per_program)
        self.rounds = rounds
        results = [r.result for r in rounds]
        # the predictor samples (self-play only) follow the writers': M per played round, in round order
        played = [r for r in rounds if r.prediction_prompt is not None] if answered else []
        predicted = [r for r in played for _ in r.predictions]
        generations = [writers, *answered]
        groups: list[Hashable] = [*([WRITER] * len(rounds)), *([PREDICTOR] * len(predicted))]
        return Rollout(
            prompts=[*prompts, *asked],
            completions=[c for g in generations for c in g.completions],
            prompt_ids=[ids for g in generations for ids in g.prompt_ids],
            completion_ids=[ids for g in generations for ids in g.completion_ids],
            logprobs=_joined_logprobs(generations),
            rewards=[*(r.writer for r in results), *(p for r in played for p in r.result.predictors)],
            groups=groups,
            extra={
                "role": ["writer"] * len(rounds) + ["predictor"] * len(predicted),
                "outcome": [r.outcome for r in results] + [r.result.outcome for r in predicted],
                "output": [r.output for r in results] + [r.result.output for r in predicted],
            },
            metrics=round_metrics(results),
        )


def _joined_logprobs(generations: Sequence[Generation]) -> list[list[float]] | None:
    """The sampler's log-probabilities of every generation in order; None unless it reported them for all."""
    rows: list[list[float]] = []
    for generation in generations:
        if generation.logprobs is None:
            return None
        rows += generation.logprobs
    return rows


@dataclass
class CodeGameAdvantage(RoleAdvantage):
    """The seam's advantage function of the game: ``R - b`` with one EMA baseline per role (RAE).

    Every sample is a player of its own (each of the M predictors of a round gave its own answer), so each
    scored sample brings its return to its role's baseline and gets ``R - b`` of the baseline as it was before
    the step; a masked sample (None) gets 0 and leaves the baselines alone. The baselines are shared by every
    process and join the step's metrics (``rae/baseline/code-game/<role>``).
    """

    one_return_per: Literal["game", "sample"] = "sample"
    roles: Collection[RoleKey] | None = (WRITER, PREDICTOR)
