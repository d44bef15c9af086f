"""One GRPO run, top to bottom: platform, data, model, sandbox, TRL, evaluations, final model, summary."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any, cast

import torch
from rich.console import Console
from rich.logging import RichHandler
from transformers import PrinterCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint
from trl.trainer.grpo_config import GRPOConfig

from .callbacks import RunCallback
from .config import ConfigError, TrainConfig
from .evaluation import HeldOutEvaluator
from .grpo import CodegymGRPOTrainer
from .interrupt import InterruptCheckpoint
from .logs import MetricsSink
from .models import load_model, load_tokenizer, resolve_source
from .platform import Platform, detect, per_device_batch, training_rank
from .progress import ProgressDisplay
from .rewards import SandboxReward
from .sandbox import sandbox_urls, scorer_factory
from .summary import RunSummary, plot_rewards, rewards_from_metrics, time_split, write_summary
from .tasks import heldout_tasks, prompt_dataset, training_tasks

log = logging.getLogger("codegym.trainer")


def _setup_logging(console: Console) -> None:
    handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=False)
    root = logging.getLogger("codegym")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    import transformers

    # transformers 5 renames gradient checkpointing; TRL still reads the old name (not ours to fix)
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _resume_path(config: TrainConfig) -> str | None:
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
    )


def run(config: TrainConfig, console: Console | None = None) -> RunSummary:
    """Train, evaluate and summarise; returns the summary (also written to ``<output_dir>/summary.json``).

    Log records of ``codegym.*`` go to ``console`` during the run; the logger is put back afterwards. Of
    several training processes (torchrun, accelerate launch), only the first prints and writes the run's
    files; the others train in silence.
    """
    console = (console or Console()) if training_rank() == 0 else Console(quiet=True)
    logger = logging.getLogger("codegym")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    _setup_logging(console)
    try:
        return _run(config, console)
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def _run(config: TrainConfig, console: Console) -> RunSummary:
    if config.task == "spiral":
        from .selfplay.spiral_run import run_spiral

        return run_spiral(config, console)
    if config.task == "code-game":
        from .selfplay.code_game_run import run_code_game

        return run_code_game(config, console)
    started = time.monotonic()
    platform = detect(config)
    log.info(platform.describe())
    if platform.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    if config.wandb_project:
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise ConfigError("--wandb-project needs the wandb package: pip install 'codegym-trainer[wandb]'")
        os.environ.setdefault("WANDB_PROJECT", config.wandb_project)
        os.environ.setdefault("WANDB_MODE", config.wandb_mode)
        os.environ.setdefault("WANDB_DIR", str(config.output_dir))
    torch.set_num_threads(platform.threads)
    set_seed(config.seed)
    resume = _resume_path(config)

    train = training_tasks(config)
    # the first process evaluates while the others wait for it at the next step's first collective
    heldout = [] if config.skip_eval or not platform.main else heldout_tasks(config)
    log.info(
        "%d training tasks from %s, %d held-out tasks from %s",
        len(train),
        config.dataset,
        len(heldout),
        config.eval_dataset,
    )

    source = resolve_source(config.model, config.gguf_file)
    log.info("loading model %s", source.label)
    tokenizer = load_tokenizer(source, offline=platform.offline)
    model = load_model(source, offline=platform.offline)
    chat = tokenizer.chat_template is not None
    dataset = prompt_dataset(train, chat=chat)

    if platform.main:
        config.output_dir.mkdir(parents=True, exist_ok=True)
        (config.output_dir / "config.yaml").write_text(_as_yaml(config))
    sink = MetricsSink(config.output_dir, wandb_enabled=bool(config.wandb_project), enabled=platform.main)
    display = ProgressDisplay(config.train_steps, console, enabled=config.progress)
    interrupt = InterruptCheckpoint()
    try:
        with sandbox_urls(config) as urls:
            log.info("sandbox: %s", ", ".join(urls))

            reward = SandboxReward(
                {t.task_id: t for t in train},
                lambda: scorer_factory(config, urls),
                scheme=config.reward_scheme,
                partial_credit=config.partial_credit,
            )
            evaluator = (
                HeldOutEvaluator.for_run(
                    config, heldout, tokenizer, lambda: scorer_factory(config, urls), config.output_dir / "evaluations"
                )
                if heldout
                else None
            )
            callback = RunCallback(sink, display, evaluator, eval_interval=config.eval_interval)
            trainer = CodegymGRPOTrainer(
                model=model,
                processing_class=tokenizer,
                reward_funcs=[reward],
                args=grpo_args(config, platform),
                train_dataset=dataset,
                callbacks=[callback, interrupt],
                completions_interval=config.completions_interval,
            )
            trainer.remove_callback(PrinterCallback)  # the live display and metrics.jsonl show the logs
            interrupt.install()
            try:
                trainer.train(resume_from_checkpoint=resume)
            finally:
                interrupt.uninstall()
                display.stop()
                asyncio.run_coroutine_threadsafe(reward.aclose(), trainer.async_loop).result(timeout=30)
            final_model: str | None = None
            if interrupt.requested:
                log.warning(
                    "stopped at step %d on Ctrl-C; checkpoint in %s (resume with --resume latest)",
                    trainer.state.global_step,
                    config.output_dir,
                )
            else:
                if evaluator is not None and (
                    not evaluator.points or evaluator.points[-1].step != trainer.state.global_step
                ):
                    callback.evaluate(trainer.model, trainer.state.global_step)
                final = config.output_dir / "final"
                trainer.save_model(str(final))  # every process: the trainer has the first one write
                if platform.main:
                    tokenizer.save_pretrained(str(final))
                final_model = str(final)
    finally:
        sink.close()

    if not platform.main:
        return RunSummary(trainer.state.global_step, [], [], time.monotonic() - started, final_model=final_model)

    metrics_file = config.output_dir / "metrics.jsonl"
    rewards = rewards_from_metrics(metrics_file)
    evals = evaluator.points if evaluator is not None else []
    plot = plot_rewards(rewards, evals, config.output_dir / "reward_curve.png")
    summary = RunSummary(
        steps=trainer.state.global_step,
        rewards=rewards,
        evals=evals,
        seconds=time.monotonic() - started,
        time_split=time_split(metrics_file),
        masked_rewards=reward.masked_total,
        final_model=final_model,
        plot=str(plot),
    )
    write_summary(summary, config.output_dir)
    console.rule("[bold]codegym-train summary")
    for line in summary.lines():
        console.print(line, highlight=False)
    return summary


def _as_yaml(config: TrainConfig) -> str:
    import yaml

    return str(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
