"""One code-output game run (``codegym-train --task code-game``): writers against predictors, output-prediction evals.

The run is a self-play run (:mod:`codegym_trainer.lifecycle`: the code task's platform, model loading, logs,
checkpoints and Ctrl-C handling; ``selfplay.training``: role baselines saved with every checkpoint), with the
code task's sandbox; what is the game's own is the data (the writer's prompt: TRL's dataset rows only pace the
steps), the seam's rollout and advantage functions (``code_game.rollout``), and the evaluation: the held-out
output-prediction set, before the first step, every ``--eval-interval`` steps and at the end.
"""

from __future__ import annotations

import logging
from typing import Any

from rich.console import Console

from ... import lifecycle
from ...config import TrainConfig
from ...platform import Platform
from ...progress import TIMES, Column
from ...sandbox import RunSandbox, sandbox_urls
from ...summary import RunSummary
from .. import training
from .evaluation import ACCURACY, OutputPredictionCallback, OutputPredictionEvaluator
from .output_prediction import load_output_problems
from .rollout import CodeGameAdvantage, CodeGameRollout, writer_dataset
from .rounds import OpponentPredictor, Predict

log = logging.getLogger("codegym.trainer")

COLUMNS: tuple[Column, ...] = (
    ("reward", "reward", ".2f"),
    ("writer wins", "code_game/writer_win_rate", ".0%"),
    ("predicted", "code_game/predictor_accuracy", ".0%"),
    ("invalid", "code_game/invalid_rate", ".0%"),
    ("chars", "code_game/program_chars", ".0f"),
    *TIMES[::2],  # generation (the sandbox runs too: they happen in the rollout) and optimisation; no scoring
)
"""The live progress line of the game."""


def step_split(config: TrainConfig, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps) for a step of up to programs x (1 + M) samples."""
    predictors = config.predictions_per_program if config.predictor == "self" else 0
    return training.step_split(config.code_game_programs_per_step * (1 + predictors), platform)


def predictor_of(config: TrainConfig) -> Predict | None:
    """The frozen opponent ``--predictor URL`` names; None for self-play."""
    if config.predictor == "self":
        return None
    return OpponentPredictor(
        config.predictor,
        config.predictor_model,
        api=config.predictor_api,
        temperature=config.train_temperature,
        max_tokens=config.max_completion_length,
        seed=config.seed,
    )


def run_code_game(config: TrainConfig, console: Console) -> RunSummary:
    """Train by the code-output game, evaluate output prediction, save the model; the summary of the run."""
    run = lifecycle.start(config)
    tokenizer, model, chat = lifecycle.load_policy(run, f"code-output game, predictor {config.predictor}")
    advantage = training.load_baselines(CodeGameAdvantage.create(enabled=config.rae), run)

    sink, display = lifecycle.open_logs(run, console, columns=COLUMNS, evaluation="output accuracy")
    evaluator = OutputPredictionEvaluator(load_output_problems(), config.output_dir / "code_game_eval")
    evaluation = OutputPredictionCallback(
        evaluator,
        sink,
        tokenizer,
        interval=config.eval_interval,
        max_new_tokens=config.eval_max_new_tokens,
        batch_size=config.eval_batch_size,
        display=display,
    )
    try:
        with sandbox_urls(config) as urls:
            log.info("sandbox: %s", ", ".join(urls))
            rollout = CodeGameRollout(
                programs_per_step=config.code_game_programs_per_step,
                predictions_per_program=config.predictions_per_program,
                chat=chat,
                opponent=predictor_of(config),
            )
            steps, final_model = training.train(
                run,
                (tokenizer, model),
                dataset=writer_dataset(training.DATASET_ROWS, chat=chat),
                split=step_split(config, run.platform),
                rollout=rollout,
                advantage=advantage,
                sandbox=RunSandbox.of(config, urls),
                reward=game_reward,
                evaluation=evaluation,
                sink=sink,
                display=display,
            )
    finally:
        sink.close()

    total = len(evaluator.problems)
    points = evaluator.history[:1] + evaluator.history[1:][-1:]  # the first and the last
    return training.summarise(
        run,
        console,
        steps=steps,
        final_model=final_model,
        head={"task": "code-game", "predictor": config.predictor},
        tail={"output_prediction": [{"step": step, ACCURACY: accuracy} for step, accuracy in evaluator.history]},
        title="code-output game",
        lines=[
            f"output prediction {label} (step {step}): {accuracy:.3f} of {total} programs"
            for label, (step, accuracy) in zip(("before", "after"), points, strict=False)
        ],
    )


def game_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL's trainer wants a reward function; the game scores its own samples in its rollout, never here."""
    raise RuntimeError("the code-output game's rewards come from its rollout, not from a reward function")
