"""Code repair with tools (``codegym-train --task code-repair --tools``): TRL's environment path.

The policy calls the evaluator's :class:`~codegym_evaluator.trl_env.CodeEnvironment` tools (``run_python``,
``run_tests``, ``submit``) and TRL runs its own tool loop (``GRPOTrainer(environment_factory=...)``): it parses
the calls, awaits the tools, splices their answers into the completion with 0s in its ``tool_mask``, and adds
the environment's ``get_reward`` (the last program given to ``run_tests`` or ``submit``, judged on all the
task's tests) as the reward. The trainer's seam keeps all of that: the rollout is ``code_rollout``, whose
``generate`` is TRL's, and the trainer resets the environments with the step's rows before it
(``codegym_trainer.environments``).

An environment here reads the trainer's own tasks by ``task_id`` (no dataset columns to re-parse), and shows
the tests every front door shows (``Task.visible_tests`` with ``--public-tests``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from codegym_evaluator.tasks import Task
from codegym_evaluator.trl_env import CodeEnvironment

from ..config import EMBEDDED_MODEL, ConfigError, TrainConfig
from ..sandbox import RunSandbox


class TaskEnvironment(CodeEnvironment):
    """A :class:`CodeEnvironment` whose rows name the trainer's tasks (``task_id``): all of a task's tests judge
    the reward, the visible ones (``Task.visible_tests``) are shown and run by ``run_tests``."""

    def __init__(self, url: str, *, tasks: Mapping[str, Task], **settings: Any) -> None:
        super().__init__(url, **settings)
        self.tasks = tasks

    def _split(self, row: Mapping[str, Any]) -> tuple[Task, list[dict[str, Any]]]:
        task = self.tasks[str(row["task_id"])]
        return task, task.visible_tests(self.public_tests)


def check_tools(config: TrainConfig, tokenizer: Any = None) -> None:
    """Refuse ``--tools`` where it cannot run: on another task than code repair, with a turn discount (the
    environment's reward knows no turns), or, given the policy's ``tokenizer``, for a model whose chat template
    cannot call tools."""
    if config.task != "code-repair":
        raise ConfigError(f"--tools trains --task code-repair through TRL's environment path, not --task {config.task}")
    if config.turn_discount != 1.0:
        raise ConfigError("--turn-discount applies to --task code-repair without --tools (its reward counts no turns)")
    if tokenizer is None:
        return
    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        which = "the embedded SmolLM2-135M-Instruct" if config.model == EMBEDDED_MODEL else repr(config.model)
        raise ConfigError(
            f"--tools needs a model whose chat template calls tools, and {which} has none (its template cannot "
            "render a tool call and its result); train it with --task code-repair without --tools, which shows "
            "the feedback as a user message"
        )


def environment_factory(
    config: TrainConfig, sandbox: RunSandbox, tasks: Mapping[str, Task]
) -> Callable[[], TaskEnvironment]:
    """TRL's ``environment_factory``: each environment on the run's sandbox's next URL in turn, with its token,
    retries and run limit (TRL makes the environments, so they take the sandbox here, not from the seam's context),
    and the run's public tests and partial credit."""
    next_url = itertools.cycle(sandbox.urls).__next__

    def make() -> TaskEnvironment:
        return TaskEnvironment(
            next_url(),
            tasks=tasks,
            token=sandbox.token,
            public_tests=config.public_tests,
            partial=config.partial_credit,
            timeout_s=sandbox.timeout_per_test,
            cell_timeout_s=sandbox.timeout_per_test,
            retries=sandbox.retries,
        )

    return make
