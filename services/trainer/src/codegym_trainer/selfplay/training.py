"""What every self-play run (``--task spiral``, ``--task code-game``) adds to the run's lifecycle.

A self-play run is the code task's run (:mod:`codegym_trainer.lifecycle`: platform, model loading, logs,
checkpoints, Ctrl-C handling) with the seam's two functions swapped, plus role baselines that are saved in
every checkpoint and in ``final/`` (``rae_baselines.json``), so a resumed run goes on from them. A game's run
module reads top to bottom as: ``lifecycle.start``, ``lifecycle.load_policy``, :func:`load_baselines`,
``lifecycle.open_logs``, :func:`train`, :func:`summarise`, with its own game, evaluation and summary lines
in between.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset
from rich.console import Console
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from .. import lifecycle
from ..callbacks import RunCallback
from ..lifecycle import Evaluation, RewardFunction, Started
from ..logs import MetricsSink
from ..platform import Platform, per_device_batch
from ..progress import ProgressDisplay
from ..rollout import StepRollout
from ..sandbox import RunSandbox
from ..summary import RunSummary
from .advantage import RoleAdvantage, RoleBaselines

BASELINES_FILE = "rae_baselines.json"
SAMPLES_PER_PASS = 16  # samples per forward pass on the CPU: a step's samples at once would not fit its memory
DATASET_ROWS = 64  # the rows only pace TRL's sampler (the game makes the samples), so there are just enough


class SaveBaselines(TrainerCallback):
    """Writes the role baselines into every checkpoint the trainer saves (the first process: every process
    holds the same ones)."""

    def __init__(self, baselines: RoleBaselines) -> None:
        self.baselines = baselines

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        checkpoint = Path(args.output_dir or ".") / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and checkpoint.is_dir():
            (checkpoint / BASELINES_FILE).write_text(json.dumps(self.baselines.state_dict()))


def step_split(most: int, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps) for a step of up to ``most`` samples.

    TRL cuts a step's samples into as many micro-batches as accumulation steps. A GPU takes the platform's
    split of that many; the CPU, which takes a code step whole, gets slices of about ``SAMPLES_PER_PASS``.
    """
    if platform.kind == "cpu":
        return 2, max(1, math.ceil(most / SAMPLES_PER_PASS))
    return 2, per_device_batch(platform, most)[1]


def load_baselines(advantage: RoleAdvantage, run: Started) -> RoleAdvantage:
    """``advantage`` with the baselines of the checkpoint the run resumes from, if it saved any."""
    if run.resume is not None and (Path(run.resume) / BASELINES_FILE).exists():
        state = json.loads((Path(run.resume) / BASELINES_FILE).read_text())
        advantage.rae.baselines = RoleBaselines.from_state_dict(state)
    return advantage


def train(
    run: Started,
    policy: tuple[PreTrainedTokenizerBase, PreTrainedModel],
    *,
    dataset: Dataset,
    split: tuple[int, int],
    rollout: StepRollout,
    advantage: RoleAdvantage,
    reward: RewardFunction,
    evaluation: Evaluation,
    sink: MetricsSink,
    display: ProgressDisplay,
    sandbox: RunSandbox | None = None,
) -> tuple[int, str | None]:
    """Train through the seam with the game's rollout and advantages, evaluate at the end, save the model and
    its baselines (:func:`codegym_trainer.lifecycle.train`).

    ``reward`` is the trainer's reward function, which self-play never calls: its rollouts score their own
    samples (a game that runs programs reaches the run's ``sandbox`` through the seam's context). Of several
    training processes the first evaluates (the others wait for it at the next step's first collective) and
    writes the files.
    """
    config = run.config
    evaluates = not config.skip_eval and run.platform.main
    callbacks: list[TrainerCallback] = [RunCallback(sink, display, None, eval_interval=0)]
    if evaluates:
        callbacks.insert(0, evaluation)  # type: ignore[arg-type]  # every task's evaluation is a TrainerCallback
    callbacks.append(SaveBaselines(advantage.rae.baselines))

    def save_baselines(final: Path) -> None:
        (final / BASELINES_FILE).write_text(json.dumps(advantage.rae.baselines.state_dict()))

    return lifecycle.train(
        run,
        policy,
        dataset=dataset,
        reward_funcs=[reward],
        callbacks=callbacks,
        evaluation=evaluation if evaluates else None,
        display=display,
        # a group of 2 only sizes TRL's batches: self-play samples are not GRPO groups
        args=lifecycle.grpo_args(config.model_copy(update={"group_size": 2}), run.platform, split=split),
        step_rollout=rollout,
        step_advantage=advantage,
        save_with_model=save_baselines,
        sandbox=sandbox,
    )


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
    summary = lifecycle.summarise(run, steps=steps, final_model=final_model)
    saved = {**head, **summary.to_dict(), **tail}
    for key in ("pass_at_1_before", "pass_at_1_after", "evaluations", "masked_rewards"):
        saved.pop(key, None)  # the code task's held-out pass@1: a self-play run has its own evaluations
    printed = [f"steps: {summary.steps} in {summary.seconds / 60:.1f} min", *lines]
    if final_model:
        printed.append(f"final model: {final_model}")
    lifecycle.publish(run, console, saved=saved, title=f"codegym-train summary ({title})", lines=printed)
    return summary
