"""One code-output game run (``codegym-train --task code-game``): writers against predictors, output-prediction evals.

The run shares the code task's platform, model loading, sandbox, logs, checkpoints and Ctrl-C handling; what
differs is the data (the writer's prompt: TRL's dataset rows only pace the steps), the seam's rollout and
advantage functions (``code_game_rollout``), and the evaluation: the held-out output-prediction set, before
the first step, every ``--eval-interval`` steps and at the end. The role baselines are saved in every
checkpoint as SPIRAL's are (``rae_baselines.json``), so a resumed run goes on from them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from transformers import PrinterCallback, TrainerCallback, set_seed

from ..callbacks import RunCallback
from ..config import TrainConfig
from ..grpo import CodegymGRPOTrainer
from ..interrupt import InterruptCheckpoint
from ..logs import MetricsSink
from ..models import load_model, load_tokenizer, resolve_source
from ..platform import Platform, detect, per_device_batch
from ..progress import ProgressDisplay
from ..run import _as_yaml, _resume_path, grpo_args
from ..sandbox import sandbox_urls
from ..summary import RunSummary, plot_rewards, rewards_from_metrics, time_split
from .advantage import RoleBaselines, RoleConditionedAdvantage, all_gather_sums
from .code_game_rollout import CodeGameAdvantage, CodeGameRollout, writer_dataset
from .code_game_round import OpponentPredictor, Predict
from .output_prediction import load_output_problems
from .output_prediction_eval import ACCURACY, OutputPredictionCallback, OutputPredictionEvaluator
from .program_runner import ProgramRunner
from .spiral_run import BASELINES_FILE, SAMPLES_PER_PASS, SaveBaselines

log = logging.getLogger("codegym.trainer")


def step_split(config: TrainConfig, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps) for a step of up to programs x (1 + M) samples.

    TRL cuts a step's samples into as many micro-batches as accumulation steps. A GPU takes the platform's
    split; the CPU gets slices of about ``SAMPLES_PER_PASS`` samples.
    """
    most = config.code_game_programs_per_step * (
        1 + (config.predictions_per_program if config.predictor == "self" else 0)
    )
    if platform.kind == "cpu":
        return 2, max(1, math.ceil(most / SAMPLES_PER_PASS))
    return 2, per_device_batch(platform, most)[1]


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
    started = time.monotonic()
    platform = detect(config)
    log.info(platform.describe())
    if platform.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(platform.threads)
    set_seed(config.seed)
    resume = _resume_path(config)

    source = resolve_source(config.model, config.gguf_file)
    log.info("loading model %s; code-output game, predictor %s", source.label, config.predictor)
    tokenizer = load_tokenizer(source, offline=platform.offline)
    model = load_model(source, offline=platform.offline)
    chat = tokenizer.chat_template is not None
    rows, accumulation = step_split(config, platform)

    advantage = CodeGameAdvantage(RoleConditionedAdvantage(enabled=config.rae, share=all_gather_sums))
    if resume is not None and (Path(resume) / BASELINES_FILE).exists():
        state = json.loads((Path(resume) / BASELINES_FILE).read_text())
        advantage.rae.baselines = RoleBaselines.from_state_dict(state)

    config.output_dir.mkdir(parents=True, exist_ok=True)
    (config.output_dir / "config.yaml").write_text(_as_yaml(config))
    sink = MetricsSink(config.output_dir, wandb_enabled=bool(config.wandb_project))
    display = ProgressDisplay(config.train_steps, console, enabled=config.progress)
    interrupt = InterruptCheckpoint()
    evaluator = OutputPredictionEvaluator(load_output_problems(), config.output_dir / "code_game_eval")
    evaluation = OutputPredictionCallback(
        evaluator,
        sink,
        tokenizer,
        interval=config.eval_interval,
        max_new_tokens=config.eval_max_new_tokens,
        batch_size=config.eval_batch_size,
    )
    callbacks: list[TrainerCallback] = [RunCallback(sink, display, None, eval_interval=0), interrupt]
    callbacks += [SaveBaselines(advantage.rae.baselines)]
    if not config.skip_eval:
        callbacks.insert(0, evaluation)
    try:
        with (
            sandbox_urls(config) as urls,
            ProgramRunner(
                urls, token=config.sandbox_token, concurrency=config.concurrency, retries=config.sandbox_retries
            ) as runner,
        ):
            log.info("sandbox: %s", ", ".join(urls))
            rollout = CodeGameRollout(
                runner,
                programs_per_step=config.code_game_programs_per_step,
                predictions_per_program=config.predictions_per_program,
                chat=chat,
                opponent=predictor_of(config),
            )
            trainer = CodegymGRPOTrainer(
                model=model,
                processing_class=tokenizer,
                reward_funcs=[game_reward],
                args=grpo_args(config.model_copy(update={"group_size": 2}), platform, split=(rows, accumulation)),
                train_dataset=writer_dataset(64, chat=chat),
                callbacks=callbacks,
                completions_interval=config.completions_interval,
                rollout_fn=rollout,
                advantage_fn=advantage,
            )
            trainer.remove_callback(PrinterCallback)
            interrupt.install()
            try:
                trainer.train(resume_from_checkpoint=resume)
            finally:
                interrupt.uninstall()
                display.stop()
            final_model: str | None = None
            if interrupt.requested:
                log.warning(
                    "stopped at step %d on Ctrl-C; checkpoint in %s", trainer.state.global_step, config.output_dir
                )
            else:
                step = trainer.state.global_step
                if not config.skip_eval and not evaluation.evaluated(step):
                    evaluation.evaluate(trainer.model, step)
                final = config.output_dir / "final"
                trainer.save_model(str(final))
                tokenizer.save_pretrained(str(final))
                (final / BASELINES_FILE).write_text(json.dumps(advantage.rae.baselines.state_dict()))
                final_model = str(final)
    finally:
        sink.close()

    metrics_file = config.output_dir / "metrics.jsonl"
    rewards = rewards_from_metrics(metrics_file)
    summary = RunSummary(
        steps=trainer.state.global_step,
        rewards=rewards,
        evals=[],
        seconds=time.monotonic() - started,
        time_split=time_split(metrics_file),
        final_model=final_model,
        plot=str(plot_rewards(rewards, [], config.output_dir / "reward_curve.png")),
    )
    history = [{"step": step, ACCURACY: accuracy} for step, accuracy in evaluator.history]
    saved = {"task": "code-game", "predictor": config.predictor, **summary.to_dict(), "output_prediction": history}
    for key in ("pass_at_1_before", "pass_at_1_after", "evaluations", "masked_rewards"):
        saved.pop(key, None)
    (config.output_dir / "summary.json").write_text(json.dumps(saved, indent=2))
    console.rule("[bold]codegym-train summary (code-output game)")
    console.print(f"steps: {summary.steps} in {summary.seconds / 60:.1f} min", highlight=False)
    total = len(evaluator.problems)
    points = evaluator.history[:1] + evaluator.history[1:][-1:]  # the first and the last
    for label, (step, accuracy) in zip(("before", "after"), points, strict=False):
        console.print(f"output prediction {label} (step {step}): {accuracy:.3f} of {total} programs", highlight=False)
    if final_model:
        console.print(f"final model: {final_model}", highlight=False)
    return summary


def game_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL's trainer wants a reward function; the game scores its own samples in its rollout, never here."""
    raise RuntimeError("the code-output game's rewards come from its rollout, not from a reward function")
