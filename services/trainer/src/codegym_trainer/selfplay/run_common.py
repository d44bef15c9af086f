"""What every self-play run (``--task spiral``, ``--task code-game``) shares around its own game.

A self-play run is the code task's run with the seam's two functions swapped: it shares the platform, model
loading, logs, checkpoints and Ctrl-C handling, and adds role baselines that are saved in every checkpoint
and in ``final/`` (``rae_baselines.json``), so a resumed run goes on from them. A task's run module reads top
to bottom as: :func:`start`, :func:`load_policy`, :func:`load_baselines`, :func:`open_logs`, :func:`train`,
:func:`summarise`, with its own game, evaluation and summary lines in between.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from datasets import Dataset
from rich.console import Console
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PrinterCallback,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
    set_seed,
)

from ..callbacks import RunCallback
from ..config import TrainConfig
from ..grpo import CodegymGRPOTrainer
from ..interrupt import InterruptCheckpoint
from ..logs import MetricsSink
from ..models import load_model, load_tokenizer, resolve_source
from ..platform import Platform, detect, per_device_batch
from ..progress import Column, ProgressDisplay
from ..rollout import RolloutFn
from ..run import _as_yaml, _resume_path, grpo_args
from ..summary import RunSummary, plot_rewards, rewards_from_metrics, time_split
from .advantage import RoleAdvantage, RoleBaselines

log = logging.getLogger("codegym.trainer")

BASELINES_FILE = "rae_baselines.json"
SAMPLES_PER_PASS = 16  # samples per forward pass on the CPU: a step's samples at once would not fit its memory
DATASET_ROWS = 64  # the rows only pace TRL's sampler (the game makes the samples), so there are just enough


class Evaluation(Protocol):
    """A task's evaluation callback: it evaluates before the first step and every N steps by itself."""

    def evaluate(self, model: Any, step: int) -> Any:
        """Evaluate ``model`` now and log the point of ``step``."""

    def evaluated(self, step: int) -> bool:
        """Whether a point of ``step`` was logged."""


class SaveBaselines(TrainerCallback):
    """Writes the role baselines into every checkpoint the trainer saves (the first process: every process
    holds the same ones)."""

    def __init__(self, baselines: RoleBaselines) -> None:
        self.baselines = baselines

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        checkpoint = Path(args.output_dir or ".") / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and checkpoint.is_dir():
            (checkpoint / BASELINES_FILE).write_text(json.dumps(self.baselines.state_dict()))


@dataclass
class Started:
    """A run under way: when it started, on what, and the checkpoint it resumes from (None: a fresh run)."""

    config: TrainConfig
    platform: Platform
    resume: str | None
    began: float


def start(config: TrainConfig) -> Started:
    """Detect the platform, seed everything and find the checkpoint to resume from."""
    began = time.monotonic()
    platform = detect(config)
    log.info(platform.describe())
    if platform.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(platform.threads)
    set_seed(config.seed)
    return Started(config, platform, _resume_path(config), began)


def step_split(most: int, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps) for a step of up to ``most`` samples.

    TRL cuts a step's samples into as many micro-batches as accumulation steps. A GPU takes the platform's
    split of that many; the CPU, which takes a code step whole, gets slices of about ``SAMPLES_PER_PASS``.
    """
    if platform.kind == "cpu":
        return 2, max(1, math.ceil(most / SAMPLES_PER_PASS))
    return 2, per_device_batch(platform, most)[1]


def load_policy(run: Started, what: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, bool]:
    """The tokenizer, the model and whether it is prompted with chat messages; ``what`` names the run in the log."""
    source = resolve_source(run.config.model, run.config.gguf_file)
    log.info("loading model %s; %s", source.label, what)
    tokenizer = load_tokenizer(source, offline=run.platform.offline)
    model = load_model(source, offline=run.platform.offline)
    return tokenizer, model, tokenizer.chat_template is not None


def load_baselines(advantage: RoleAdvantage, run: Started) -> RoleAdvantage:
    """``advantage`` with the baselines of the checkpoint the run resumes from, if it saved any."""
    if run.resume is not None and (Path(run.resume) / BASELINES_FILE).exists():
        state = json.loads((Path(run.resume) / BASELINES_FILE).read_text())
        advantage.rae.baselines = RoleBaselines.from_state_dict(state)
    return advantage


def open_logs(
    run: Started, console: Console, *, columns: Sequence[Column], evaluation: str
) -> tuple[MetricsSink, ProgressDisplay]:
    """The run's folder with its ``config.yaml``, its metrics sink and its live display (of the first of
    several training processes: the others write nothing)."""
    config = run.config
    if run.platform.main:
        config.output_dir.mkdir(parents=True, exist_ok=True)
        (config.output_dir / "config.yaml").write_text(_as_yaml(config))
    sink = MetricsSink(config.output_dir, wandb_enabled=bool(config.wandb_project), enabled=run.platform.main)
    display = ProgressDisplay(
        config.train_steps, console, enabled=config.progress, columns=columns, evaluation=evaluation
    )
    return sink, display


def train(
    run: Started,
    policy: tuple[PreTrainedTokenizerBase, PreTrainedModel],
    *,
    dataset: Dataset,
    split: tuple[int, int],
    rollout: RolloutFn,
    advantage: RoleAdvantage,
    reward: Callable[..., list[float | None]],
    evaluation: Evaluation,
    sink: MetricsSink,
    display: ProgressDisplay,
) -> tuple[int, str | None]:
    """Train through the seam, evaluate at the end, save the model and its baselines.

    Returns the last step and the final model's folder (None when Ctrl-C stopped the run: the last checkpoint
    is what it leaves). ``reward`` is the trainer's reward function, which self-play never calls: its
    rollouts score their own samples. Of several training processes the first evaluates (the others wait for
    it at the next step's first collective) and writes the files.
    """
    config = run.config
    tokenizer, model = policy
    interrupt = InterruptCheckpoint()
    callbacks: list[TrainerCallback] = [RunCallback(sink, display, None, eval_interval=0), interrupt]
    callbacks += [SaveBaselines(advantage.rae.baselines)]
    evaluates = not config.skip_eval and run.platform.main
    if evaluates:
        callbacks.insert(0, evaluation)  # type: ignore[arg-type]  # every task's evaluation is a TrainerCallback
    trainer = CodegymGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        # a group of 2 only sizes TRL's batches: self-play samples are not GRPO groups
        args=grpo_args(config.model_copy(update={"group_size": 2}), run.platform, split=split),
        train_dataset=dataset,
        callbacks=callbacks,
        completions_interval=config.completions_interval,
        rollout_fn=rollout,
        advantage_fn=advantage,
    )
    trainer.remove_callback(PrinterCallback)  # the live display and metrics.jsonl show the logs
    interrupt.install()
    try:
        trainer.train(resume_from_checkpoint=run.resume)
    finally:
        interrupt.uninstall()
        display.stop()
    step = trainer.state.global_step
    if interrupt.requested:
        log.warning("stopped at step %d on Ctrl-C; checkpoint in %s", step, config.output_dir)
        return step, None
    if evaluates and not evaluation.evaluated(step):
        evaluation.evaluate(trainer.model, step)
    final = config.output_dir / "final"
    trainer.save_model(str(final))  # every process: the trainer has the first one write
    if run.platform.main:
        tokenizer.save_pretrained(str(final))
        (final / BASELINES_FILE).write_text(json.dumps(advantage.rae.baselines.state_dict()))
    return step, str(final)


def summarise(
    run: Started,
    console: Console,
    *,
    steps: int,
    final_model: str | None,
    head: dict[str, Any],
    tail: dict[str, Any],
    title: str,
    lines: Sequence[str],
) -> RunSummary:
    """Write ``summary.json`` and print the summary.

    ``summary.json`` holds the task's ``head`` (its name and settings), the run's numbers, then the task's
    ``tail`` (its evaluations); ``lines`` are the task's evaluation lines, printed between the steps and the
    final model. A training process other than the first writes and prints nothing.
    """
    config = run.config
    if not run.platform.main:
        return RunSummary(steps, [], [], time.monotonic() - run.began, final_model=final_model)
    metrics_file = config.output_dir / "metrics.jsonl"
    rewards = rewards_from_metrics(metrics_file)
    summary = RunSummary(
        steps=steps,
        rewards=rewards,
        evals=[],
        seconds=time.monotonic() - run.began,
        time_split=time_split(metrics_file),
        final_model=final_model,
        plot=str(plot_rewards(rewards, [], config.output_dir / "reward_curve.png")),
    )
    saved = {**head, **summary.to_dict(), **tail}
    for key in ("pass_at_1_before", "pass_at_1_after", "evaluations", "masked_rewards"):
        saved.pop(key, None)  # the code task's held-out pass@1: a self-play run has its own evaluations
    (config.output_dir / "summary.json").write_text(json.dumps(saved, indent=2))
    console.rule(f"[bold]codegym-train summary ({title})")
    console.print(f"steps: {summary.steps} in {summary.seconds / 60:.1f} min", highlight=False)
    for line in lines:
        console.print(line, highlight=False)
    if final_model:
        console.print(f"final model: {final_model}", highlight=False)
    return summary
