"""TRL's environments (``GRPOTrainer(environment_factory=...)``) inside the trainer's seam.

TRL readies its environments for a batch in its own ``_generate_and_score_completions``, which
:class:`~codegym_trainer.grpo.CodegymGRPOTrainer` replaces: it draws one environment per row from its pool
(making more as a batch needs), binds each row's tools, and resets each environment with its row, whose answer
it appends to the prompt's last message. :func:`ready_environments` does the same before the seam's rollout
runs, so that TRL's ``_generate`` (the tool loop, its ``tool_mask``) and ``_calculate_rewards`` (the
environments' ``get_reward``) find what they read. Like ``grpo.py``, this knows TRL's internals (1.16).
"""

from __future__ import annotations

import inspect
from typing import Any

# What TRL does not take as a tool (its rule: every other public method is one)
_NOT_TOOLS = ("reset", "get_reward")


def ready_environments(trainer: Any, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ready one of ``trainer``'s environments per row of ``inputs`` as TRL does; the rows with their prompts
    as the environments extended them (the rows themselves are left as they are)."""
    if trainer._multi_environment:
        raise ValueError("the trainer's seam takes one environment factory, not a dict of them")
    pool = trainer._environment_pool[None]
    while len(pool) < len(inputs):
        pool.append(trainer.environment_factories[None]())
    environments = pool[: len(inputs)]
    trainer._batch_environments = [None] * len(inputs)
    trainer.environments = environments
    trainer._sync_tool_dicts, trainer._async_tool_dicts = [], []
    for environment in environments:
        methods = [
            getattr(environment, name)
            for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if name not in _NOT_TOOLS and not name.startswith("_")
        ]
        tools = [*trainer._standalone_tools, *methods]
        trainer._sync_tool_dicts.append({t.__name__: t for t in tools if not inspect.iscoroutinefunction(t)})
        trainer._async_tool_dicts.append({t.__name__: t for t in tools if inspect.iscoroutinefunction(t)})
    rows = []
    for row, environment in zip(inputs, environments, strict=True):
        observation = environment.reset(**row)
        prompt = row["prompt"]
        if observation is not None:
            if not isinstance(prompt, list) or not isinstance(prompt[-1].get("content"), str):
                raise ValueError("an environment's reset text extends a chat prompt's last text message only")
            prompt = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + observation}]
        rows.append({**row, "prompt": prompt})
    return rows
