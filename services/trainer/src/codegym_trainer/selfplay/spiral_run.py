"""One SPIRAL run (``codegym-train --task spiral``): self-play of one game, evaluations against fixed opponents.

The run shares the code task's platform, model loading, logs, checkpoints and Ctrl-C handling; what differs
is the data (the games themselves: TRL's dataset rows only pace the steps), the seam's rollout and advantage
functions, and the evaluation. The role baselines are saved in every checkpoint (``rae_baselines.json``) so
a resumed run goes on from them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from rich.console import Console
from transformers import PrinterCallback, TrainerCallback, TrainerControl, TrainerState, TrainingArguments, set_seed

from ..callbacks import RunCallback
from ..config import TrainConfig
from ..grpo import CodegymGRPOTrainer
from ..interrupt import InterruptCheckpoint
from ..logs import MetricsSink
from ..models import load_model, load_tokenizer, resolve_source
from ..platform import Platform, detect, per_device_batch
from ..progress import TIMES, ProgressDisplay
from ..run import _as_yaml, _resume_path, grpo_args
from ..summary import RunSummary, plot_rewards, rewards_from_metrics, time_split
from .advantage import RoleBaselines
from .games import GAMES
from .spiral import RoleAdvantage, SelfPlayRollout, as_prompt, game_return
from .spiral_eval import SelfPlayEvalCallback, SelfPlayEvaluator

log = logging.getLogger("codegym.trainer")

BASELINES_FILE = "rae_baselines.json"
MOST_TURNS = {"tictactoe": 9, "kuhn_poker": 3}
SAMPLES_PER_PASS = 16  # turns per forward pass on the CPU: a step's turns at once would not fit its memory


class SaveBaselines(TrainerCallback):
    """Writes the role baselines into every checkpoint the trainer saves."""

    def __init__(self, baselines: RoleBaselines) -> None:
        self.baselines = baselines

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        checkpoint = Path(args.output_dir or ".") / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir():
            (checkpoint / BASELINES_FILE).write_text(json.dumps(self.baselines.state_dict()))


def step_split(config: TrainConfig, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps): TRL cuts a step's samples into as many
    micro-batches as accumulation steps, and a step has up to games x the game's most turns samples.

    A GPU takes the platform's split of that many; the CPU, which takes a code step whole, gets slices of
    about ``SAMPLES_PER_PASS`` turns, since a step's turns at once would not fit its memory.
    """
    most = config.selfplay_games_per_step * MOST_TURNS[config.game]
    if platform.kind == "cpu":
        return 2, max(1, math.ceil(most / SAMPLES_PER_PASS))
    return 2, per_device_batch(platform, most)[1]


def run_spiral(config: TrainConfig, console: Console) -> RunSummary:
    """Train by self-play, evaluate against fixed opponents, save the model; the summary of the run."""
    started = time.monotonic()
    platform = detect(config)
    log.info(platform.describe())
    if platform.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(platform.threads)
    set_seed(config.seed)
    resume = _resume_path(config)

    source = resolve_source(config.model, config.gguf_file)
    log.info("loading model %s; self-play of %s, RAE %s", source.label, config.game, "on" if config.rae else "off")
    tokenizer = load_tokenizer(source, offline=platform.offline)
    model = load_model(source, offline=platform.offline)
    chat = tokenizer.chat_template is not None
    opening = GAMES[config.game](random.Random(config.seed))
    rows, accumulation = step_split(config, platform)
    # the games are the data: the rows only pace TRL's sampler, so there are just enough of them
    dataset = Dataset.from_list([{"prompt": as_prompt(opening.observation(opening.roles[0]), chat=chat)}] * 64)

    advantage = RoleAdvantage.create(enabled=config.rae)
    if resume is not None and (Path(resume) / BASELINES_FILE).exists():
        state = json.loads((Path(resume) / BASELINES_FILE).read_text())
        advantage.rae.baselines = RoleBaselines.from_state_dict(state)

    config.output_dir.mkdir(parents=True, exist_ok=True)
    (config.output_dir / "config.yaml").write_text(_as_yaml(config))
    sink = MetricsSink(config.output_dir, wandb_enabled=bool(config.wandb_project))
    roles = GAMES[config.game](random.Random(0)).roles
    columns = [
        ("return", "reward", ".2f"),
        *[(f"{role} wins", f"selfplay/{role}/win_rate", ".0%") for role in roles],
        ("forfeits", "selfplay/forfeit_rate", ".0%"),
        ("tokens", "selfplay/response_length", ".1f"),
        *TIMES[::2],  # generation and optimisation: self-play has no scoring phase
    ]
    display = ProgressDisplay(config.train_steps, console, enabled=config.progress, columns=columns)
    interrupt = InterruptCheckpoint()
    evaluator = SelfPlayEvaluator(
        config.game,
        tokenizer,
        games=config.selfplay_eval_games,
        chat=chat,
        max_new_tokens=config.max_completion_length,
        batch_size=config.eval_batch_size,
        seed=config.seed,
        answers_dir=config.output_dir / "selfplay_eval",
    )
    evaluation = SelfPlayEvalCallback(evaluator, sink, every=config.selfplay_eval_every)
    callbacks: list[TrainerCallback] = [RunCallback(sink, display, None, eval_interval=0), interrupt]
    callbacks += [SaveBaselines(advantage.rae.baselines)]
    if not config.skip_eval:
        callbacks.insert(0, evaluation)
    try:
        trainer = CodegymGRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[game_return],
            args=grpo_args(config.model_copy(update={"group_size": 2}), platform, split=(rows, accumulation)),
            train_dataset=dataset,
            callbacks=callbacks,
            completions_interval=config.completions_interval,
            rollout_fn=SelfPlayRollout(config.game, config.selfplay_games_per_step, chat=chat, seed=config.seed),
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
            log.warning("stopped at step %d on Ctrl-C; checkpoint in %s", trainer.state.global_step, config.output_dir)
        else:
            step = trainer.state.global_step
            if not config.skip_eval and (not evaluator.points or evaluator.points[-1].step != step):
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
    points = [{"step": p.step, **p.metrics()} for p in evaluator.points]
    saved = {
        "task": "spiral",
        "game": config.game,
        "rae": config.rae,
        **summary.to_dict(),
        "selfplay_evaluations": points,
    }
    for key in ("pass_at_1_before", "pass_at_1_after", "evaluations", "masked_rewards"):
        saved.pop(key)
    (config.output_dir / "summary.json").write_text(json.dumps(saved, indent=2))
    console.rule("[bold]codegym-train summary (self-play)")
    console.print(f"steps: {summary.steps} in {summary.seconds / 60:.1f} min", highlight=False)
    if evaluator.points:
        console.print(f"before (step {evaluator.points[0].step}): {evaluator.points[0].describe()}", highlight=False)
    if len(evaluator.points) > 1:
        console.print(f"after (step {evaluator.points[-1].step}): {evaluator.points[-1].describe()}", highlight=False)
    if final_model:
        console.print(f"final model: {final_model}", highlight=False)
    return summary
