"""Playing rounds of the code-output game: writers' answers in, judged programs, predictions and rewards out.

A round, for each writer completion (the rules are in ``rules``):

1. parse the answer (``parse_writer``) and check the program (``check_program``);
2. run a program that passed twice in the sandbox (``ProgramRunner``: fresh interpreters, different
   string-hash seeds, tight limits, no result cache);
3. a program with one output to predict is shown to the predictors (``predictor_prompt``), output hidden;
   they give ``M`` completions each: the policy itself in self-play (the completions become predictor
   samples of the same batch) or a frozen opponent behind an OpenAI-compatible endpoint
   (``OpponentPredictor``);
4. ``score_round`` gives the writer's and each predictor's reward.

Rounds with nothing to predict (an unparsable, rejected, failing or nondeterministic program) ask no predictor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
from codegym_evaluator.model_client import Api, ModelClient, ModelError, Sampling
from codegym_evaluator.scoring import RunOutput

from .program_check import check_program
from .program_runner import ProgramRunner
from .rules import (
    RoundResult,
    WriterAnswer,
    parse_prediction,
    parse_writer,
    predictor_prompt,
    score_round,
)

Predict = Callable[[Sequence[str], int], Sequence[Sequence[str]]]
"""Predictor prompts and ``M`` in; ``M`` completions for each prompt out, in the same order."""


@dataclass(frozen=True)
class PlayedRound:
    """One writer's round: what it wrote, the program's runs, what the predictors saw and said, the rewards.

    ``prediction_prompt`` is None (and ``predictions`` empty) when there was no output to predict.
    """

    writer_completion: str
    answer: WriterAnswer | None
    runs: tuple[RunOutput, ...]
    prediction_prompt: str | None
    predictions: tuple[str, ...]
    result: RoundResult


def play_rounds(
    writer_completions: Sequence[str], runner: ProgramRunner, predict: Predict, predictions_per_program: int
) -> list[PlayedRound]:
    """Judge every writer completion, ask for ``predictions_per_program`` predictions of each program that has
    an output (one ``predict`` call for all of them, made even when none has), and score every round."""
    m = predictions_per_program
    if m < 1:
        raise ValueError(f"a round needs at least one prediction, not {m}")
    answers = [parse_writer(c) for c in writer_completions]
    programs = {i: a.program for i, a in enumerate(answers) if a is not None and not check_program(a.program)}
    runs: dict[int, tuple[RunOutput, ...]] = dict.fromkeys(range(len(answers)), ())
    runs.update(zip(programs, runner.run_twice(list(programs.values())), strict=True))
    # Scored with no predictions yet, a round says whether it has an output to predict (``output``); the same
    # rules then score it with the predictions, so there is one place that decides what a playable program is.
    unplayed = [score_round(a, runs[i], [None] * m) for i, a in enumerate(answers)]
    playable = [i for i, r in enumerate(unplayed) if r.output is not None]
    prompts = [predictor_prompt(programs[i]) for i in playable]
    # called even with no prompts: a predictor that is the policy generates in step with the other processes
    completions = [list(c) for c in predict(prompts, m)]
    if len(completions) != len(prompts) or any(len(c) != m for c in completions):
        got = [len(c) for c in completions]
        raise ValueError(f"asked {m} predictions for each of {len(prompts)} programs; got {got}")
    predicted = dict(zip(playable, zip(prompts, completions, strict=True), strict=True))
    rounds = []
    for i, (completion, answer) in enumerate(zip(writer_completions, answers, strict=True)):
        if i in predicted:
            prompt, texts = predicted[i]
            result = score_round(answer, runs[i], [parse_prediction(t) for t in texts])
            rounds.append(PlayedRound(completion, answer, runs[i], prompt, tuple(texts), result))
        else:
            rounds.append(PlayedRound(completion, answer, runs[i], None, (), unplayed[i]))
    return rounds


class OpponentPredictor:
    """A frozen opponent behind an OpenAI-compatible endpoint (vLLM, llama.cpp's server) as the predictor.

    ``model`` is the id the endpoint serves; unset, the first one it lists (``GET /models``). Each prompt is
    sent as a user message (``api="chat"``) or as raw text (``"completion"``), asking for ``M`` samples at
    ``temperature``. An endpoint that still fails after the client's retries raises ``ModelError``: a round
    without its opponent cannot be scored, and a run should not quietly train the writer alone.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api: Api = "chat",
        temperature: float = 0.8,
        max_tokens: int = 256,
        api_key: str | None = None,
        concurrency: int = 4,
        seed: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api: Api = api
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.api_key = api_key
        self.concurrency = concurrency
        self.seed = seed
        self.transport = transport

    def __call__(self, prompts: Sequence[str], m: int) -> list[list[str]]:
        if not prompts:
            return []
        # Called from the training loop's thread, which runs no event loop of its own.
        return asyncio.run(self._predict(list(prompts), m))

    async def _predict(self, prompts: list[str], m: int) -> list[list[str]]:
        sampling = Sampling(n=m, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed)
        async with ModelClient(
            self.base_url,
            self.model or "",
            api=self.api,
            api_key=self.api_key,
            concurrency=self.concurrency,
            transport=self.transport,
        ) as client:
            if self.model is None:
                served = await client.models()
                if not served:
                    raise ModelError(f"model endpoint {self.base_url} serves no model")
                self.model = client.model = served[0]
            asked = [[{"role": "user", "content": p}] if self.api == "chat" else p for p in prompts]
            return list(await asyncio.gather(*(client.generate(a, sampling) for a in asked)))
