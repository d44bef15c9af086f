"""The life of one training run, the same for every task (GRPO on code, SPIRAL, the code-output game).

A task's run reads top to bottom as :func:`start` (platform, seeds, the checkpoint to resume from),
:func:`load_policy`, :func:`open_logs` (the run's folder, its metrics sink and live display), :func:`train`
(TRL's trainer driven through the seam, Ctrl-C handling, the final model), :func:`summarise` and
:func:`publish`, with the task's own data, rewards and evaluations in between. Several training processes
(torchrun, accelerate launch) all train; only the first writes the run's files and prints.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import torch
from datasets import Dataset
from rich.console import Console
from transformers import PreTrainedModel, PreTrainedTokenizerBase, PrinterCallback, TrainerCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint
from trl.trainer.grpo_config import GRPOConfig

from .config import ConfigError, TrainConfig
from .evaluation import EvalPoint
from .grpo import CodegymGRPOTrainer
from .interrupt import InterruptCheckpoint
from .logs import MetricsSink
from .platform import Platform, detect, per_device_batch
from .policy_loading import load_model, load_tokenizer, resolve_source
from .progress import CODE_COLUMNS, Column, ProgressDisplay
from .rollout import StepAdvantage, StepRollout, code_rollout
from .sandbox import RunSandbox
from .summary import RunSummary, plot_rewards, rewards_from_metrics, time_split

log = logging.getLogger("codegym.trainer")

# a reward function in TRL's shape, plain or async (the sandbox reward)
RewardFunction = Callable[..., list[float | None] | Awaitable[list[float | None]]]


class Evaluation(Protocol):
    """A task's evaluation callback: it evaluates before the first step and every N steps by itself."""

    def evaluate(self, model: Any, step: int) -> Any:
        """Evaluate ``model`` now and log the point of ``step``."""

    def evaluated(self, step: int) -> bool:
        """Whether a point of ``step`` was logged."""


@dataclass
class Started:
    """A run under way: when it started, on what, and the checkpoint it resumes from (None: a fresh run)."""

    config: TrainConfig
    platform: Platform
    resume: str | None
    began: float


def start(config: TrainConfig) -> Started:
    """Detect the platform, point W&B at the run, seed everything and find the checkpoint to resume from."""
    began = time.monotonic()
    platform = detect(config)
    log.info(platform.describe())
    if platform.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    if config.wandb_project:
        if importlib.util.find_spec("wandb") is None:
            raise ConfigError("--wandb-project needs the wandb package: pip install 'codegym-trainer[wandb]'")
        os.environ.setdefault("WANDB_PROJECT", config.wandb_project)
        os.environ.setdefault("WANDB_MODE", config.wandb_mode)
        os.environ.setdefault("WANDB_DIR", str(config.output_dir))
    torch.set_num_threads(platform.threads)
    set_seed(config.seed)
    return Started(config, platform, resume_path(config), began)


def resume_path(config: TrainConfig) -> str | None:
    """The checkpoint ``--resume`` names (``latest``: the newest ``checkpoint-*`` of the output folder)."""
    if config.resume is None:
        return None
    if config.resume == "latest":
        last: str | None = (
            get_last_checkpoint(str(config.output_dir))  # type: ignore[no-untyped-call]
            if config.output_dir.is_dir()
            else None
        )
        if last is None:
            raise ConfigError(f"--resume latest: no checkpoint-* directory in {config.output_dir}")
        return last
    if not Path(config.resume).is_dir():
        raise ConfigError(f"--resume {config.resume}: no such checkpoint directory")
    return config.resume


def config_yaml(config: TrainConfig) -> str:
    """The run's settings as the YAML ``--config`` reads (the run folder's ``config.yaml``)."""
    import yaml

    return str(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))


def grpo_args(config: TrainConfig, platform: Platform, *, split: tuple[int, int] | None = None) -> GRPOConfig:
    """TRL's configuration for this run on this platform.

    ``split``: (dataset rows per forward pass, gradient accumulation steps), instead of the platform's split of
    ``batch_size * group_size`` rows (a self-play step's samples are its games' turns, not its rows).
    """
    micro, accumulation = split or per_device_batch(platform, config.batch_size * config.group_size)
    report_to = ["wandb"] if config.wandb_project else "none"
    # transformers renamed gradient_checkpointing to activation_checkpointing within 5.x; both are supported
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
        else "gradient_checkpointing"
    )
    return GRPOConfig(
        output_dir=str(config.output_dir),
        max_steps=config.train_steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        num_generations=config.group_size,
        learning_rate=config.learning_rate,
        max_completion_length=config.max_completion_length,
        temperature=config.train_temperature,
        beta=config.beta,
        seed=config.seed,
        data_seed=config.seed,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        report_to=report_to,
        disable_tqdm=True,
        bf16=platform.precision == "bf16",
        fp16=platform.precision == "fp16",
        **cast(dict[str, Any], {checkpointing: platform.gradient_checkpointing}),
        use_cpu=platform.kind == "cpu",
        use_vllm=platform.use_vllm,
        vllm_mode=platform.vllm_mode,
        vllm_server_host=config.host,
        vllm_server_port=config.port,
        log_completions=False,
        dataloader_num_workers=0,
        # --tools: TRL's tool loop runs up to --max-turns rounds of tool calls (read only where there are tools)
        max_tool_calling_iterations=config.max_turns if config.tools else None,
    )


def load_policy(run: Started, what: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, bool]:
    """The tokenizer, the model and whether it is prompted with chat messages; ``what`` names the run in the log."""
    source = resolve_source(run.config.model, run.config.gguf_file)
    log.info("loading model %s; %s", source.label, what)
    tokenizer = load_tokenizer(source, offline=run.platform.offline)
    model = load_model(source, offline=run.platform.offline)
    return tokenizer, model, tokenizer.chat_template is not None


def open_logs(
    run: Started,
    console: Console,
    *,
    columns: Sequence[Column] = CODE_COLUMNS,
    evaluation: str = "held-out pass@1",
) -> tuple[MetricsSink, ProgressDisplay]:
    """The run's folder with its ``config.yaml``, its metrics sink and its live display (whose ``columns``
    and ``evaluation`` name are the task's)."""
    config = run.config
    if run.platform.main:
        config.output_dir.mkdir(parents=True, exist_ok=True)
        (config.output_dir / "config.yaml").write_text(config_yaml(config))
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
    reward_funcs: Sequence[RewardFunction],
    callbacks: Sequence[TrainerCallback],
    evaluation: Evaluation | None,
    display: ProgressDisplay,
    args: GRPOConfig | None = None,
    step_rollout: StepRollout = code_rollout,
    step_advantage: StepAdvantage | None = None,
    after_training: Callable[[CodegymGRPOTrainer], None] | None = None,
    save_with_model: Callable[[Path], None] | None = None,
    environment_factory: Callable[[], Any] | None = None,
    sandbox: RunSandbox | None = None,
) -> tuple[int, str | None]:
    """Train through the seam, evaluate at the end, save the final model.

    ``callbacks`` are the task's (its logging and evaluation callbacks, in the order they run); the Ctrl-C
    handler comes after them. ``args`` default to :func:`grpo_args`; ``step_rollout`` and ``step_advantage``
    to GRPO on code. ``evaluation`` (None: none in this run or this process) evaluates the final step if it
    has not yet. ``after_training`` runs once training stops, however it stopped (a reward's client to close);
    ``save_with_model`` writes the task's own files into the final model's folder (the first process only).
    ``environment_factory``: TRL's, whose environments' tools the policy calls in TRL's tool loop and whose
    ``get_reward`` TRL adds to ``reward_funcs`` (``--tools``). ``sandbox``: the run's, which the seam gives a
    rollout that runs programs (``TrainerContext.sandbox``).

    Returns the last step and the final model's folder (None when Ctrl-C stopped the run: the last checkpoint
    is what it leaves).
    """
    config = run.config
    tokenizer, model = policy
    interrupt = InterruptCheckpoint()
    trainer = CodegymGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=list(reward_funcs),
        args=args if args is not None else grpo_args(config, run.platform),
        train_dataset=dataset,
        callbacks=[*callbacks, interrupt],
        completions_interval=config.completions_interval,
        step_rollout=step_rollout,
        step_advantage=step_advantage,
        environment_factory=environment_factory,
        sandbox=sandbox,
    )
    trainer.remove_callback(PrinterCallback)  # the live display and metrics.jsonl show the logs
    interrupt.install()
    try:
        trainer.train(resume_from_checkpoint=run.resume)
    finally:
        interrupt.uninstall()
        display.stop()
        if after_training is not None:
            after_training(trainer)
    step = trainer.state.global_step
    if interrupt.requested:
        log.warning(
            "stopped at step %d on Ctrl-C; checkpoint in %s (resume with --resume latest)", step, config.output_dir
        )
        return step, None
    if evaluation is not None and not evaluation.evaluated(step):
        evaluation.evaluate(trainer.model, step)
    final = config.output_dir / "final"
    trainer.save_model(str(final))  # every process: the trainer has the first one write
    if run.platform.main:
        tokenizer.save_pretrained(str(final))
        if save_with_model is not None:
            save_with_model(final)
    return step, str(final)


def summarise(
    run: Started, *, steps: int, final_model: str | None, evals: Sequence[EvalPoint] = (), masked_rewards: int = 0
) -> RunSummary:
    """The run's summary from its ``metrics.jsonl``, with its reward curve drawn (``reward_curve.png``).

    ``evals`` are the held-out evaluations drawn on the curve. A training process other than the first has
    no metrics file: its summary holds the steps, the time and the final model.
    """
    config = run.config
    seconds = time.monotonic() - run.began
    if not run.platform.main:
        return RunSummary(steps, [], [], seconds, final_model=final_model)
    metrics_file = config.output_dir / "metrics.jsonl"
    rewards = rewards_from_metrics(metrics_file)
    return RunSummary(
        steps=steps,
        rewards=rewards,
        evals=list(evals),
        seconds=seconds,
        time_split=time_split(metrics_file),
        masked_rewards=masked_rewards,
        final_model=final_model,
        plot=str(plot_rewards(rewards, list(evals), config.output_dir / "reward_curve.png")),
    )


def publish(run: Started, console: Console, *, saved: Mapping[str, Any], title: str, lines: Sequence[str]) -> None:
    """Write ``saved`` as ``summary.json`` and print ``lines`` under a rule titled ``title`` (the first
    process only)."""
    if not run.platform.main:
        return
    (run.config.output_dir / "summary.json").write_text(json.dumps(saved, indent=2, default=str))
    console.rule(f"[bold]{title}")
    for line in lines:
        console.print(line, highlight=False)
