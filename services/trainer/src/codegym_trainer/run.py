"""``codegym-train``'s run: the task's run (GRPO on code here, self-play in ``selfplay/``) with its logging.

Every task's run is built from :mod:`codegym_trainer.lifecycle`; GRPO on code, top to bottom: platform,
data, model, logs, sandbox, reward, TRL, held-out evaluations, final model, summary.
"""

from __future__ import annotations

import asyncio
import logging
import warnings

from rich.console import Console
from rich.logging import RichHandler

from . import lifecycle
from .callbacks import RunCallback
from .config import TrainConfig
from .evaluation import HeldOutEvaluator
from .grpo import CodegymGRPOTrainer
from .platform import training_rank
from .repair import CodeRepairRollout
from .repair.tools import check_tools, environment_factory
from .rewards import SandboxReward
from .rollout import code_rollout
from .sandbox import RunSandbox, sandbox_urls
from .summary import RunSummary
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
    if config.tools:
        check_tools(config)  # before anything loads; the model's template once it has
    if config.task == "spiral":
        from .selfplay.spiral.run import run_spiral

        return run_spiral(config, console)
    if config.task == "code-game":
        from .selfplay.code_game.run import run_code_game

        return run_code_game(config, console)
    return run_code(config, console)


def run_code(config: TrainConfig, console: Console) -> RunSummary:
    """GRPO on code: train on the task's problems rewarded by the sandbox, evaluate held-out pass@1 before,
    every ``--eval-interval`` steps and at the end, save the model; the summary of the run. With ``--task
    code-repair`` the seam's rollout is :class:`~codegym_trainer.repair.CodeRepairRollout` (the reward below
    then only names the part in the logs: the rollout rewards the final answer itself); with ``--tools`` as
    well, TRL's environment path (:mod:`codegym_trainer.repair.tools`): TRL's tool loop in ``code_rollout``'s
    generation, the environments' ``get_reward`` the only reward."""
    run = lifecycle.start(config)
    train = training_tasks(config)
    # the first process evaluates while the others wait for it at the next step's first collective
    heldout = [] if config.skip_eval or not run.platform.main else heldout_tasks(config)
    log.info(
        "%d training tasks from %s, %d held-out tasks from %s",
        len(train),
        config.dataset,
        len(heldout),
        config.eval_dataset,
    )
    tokenizer, model, chat = lifecycle.load_policy(run, "GRPO on code")
    if config.tools:
        check_tools(config, tokenizer)
    dataset = prompt_dataset(train, chat=chat)

    sink, display = lifecycle.open_logs(run, console)
    try:
        with sandbox_urls(config) as urls:
            log.info("sandbox: %s", ", ".join(urls))
            # every client of the run (reward, evaluation, rollouts, environments) reaches the sandbox through it
            sandbox = RunSandbox.of(config, urls)
            reward = SandboxReward(
                {t.task_id: t for t in train},
                sandbox.scorer,
                scheme=config.reward_scheme,
                partial_credit=config.partial_credit,
            )
            evaluator = (
                HeldOutEvaluator.for_run(config, heldout, tokenizer, sandbox.scorer, config.output_dir / "evaluations")
                if heldout
                else None
            )
            callback = RunCallback(sink, display, evaluator, eval_interval=config.eval_interval)
            repair = (
                CodeRepairRollout(
                    reward.tasks,
                    tokenizer,
                    chat,
                    max_turns=config.max_turns,
                    turn_discount=config.turn_discount,
                    public_tests=config.public_tests,
                    partial_credit=config.partial_credit,
                )
                if config.task == "code-repair" and not config.tools
                else None
            )
            # --tools: TRL's environments call the sandbox and own the reward (TRL adds their get_reward)
            environments = environment_factory(config, sandbox, reward.tasks) if config.tools else None

            def close_reward(trainer: CodegymGRPOTrainer) -> None:
                # the reward's sandbox client lives on the trainer's event loop
                asyncio.run_coroutine_threadsafe(reward.aclose(), trainer.async_loop).result(timeout=30)

            steps, final_model = lifecycle.train(
                run,
                (tokenizer, model),
                dataset=dataset,
                reward_funcs=[] if environments is not None else [reward],
                callbacks=[callback],
                evaluation=callback if evaluator is not None else None,
                display=display,
                after_training=close_reward,
                step_rollout=repair if repair is not None else code_rollout,
                environment_factory=environments,
                sandbox=sandbox,
            )
    finally:
        sink.close()

    summary = lifecycle.summarise(
        run,
        steps=steps,
        final_model=final_model,
        evals=evaluator.points if evaluator is not None else [],
        masked_rewards=reward.masked_total,
    )
    lifecycle.publish(run, console, saved=summary.to_dict(), title="codegym-train summary", lines=summary.lines())
    return summary
