"""Training and held-out tasks, and the dataset of prompts GRPO samples from."""

from __future__ import annotations

import logging
from typing import Any

from codegym_evaluator.prompts import base_prompt, chat_messages
from codegym_evaluator.tasks import DatasetError, Task, load_tasks, read_task_file, select_tasks
from datasets import Dataset

from .config import BUILTIN_HELDOUT, BUILTIN_TRAIN, ConfigError, TrainConfig
from .data import HELDOUT_FILE, TRAIN_FILE

_BUILTIN = {BUILTIN_TRAIN: TRAIN_FILE, BUILTIN_HELDOUT: HELDOUT_FILE}
log = logging.getLogger(__name__)


def _load(dataset: str, path: str | None, split: str | None, limit: int | None, difficulty: str | None) -> list[Task]:
    try:
        if dataset in _BUILTIN and path is None:
            tasks = read_task_file(_BUILTIN[dataset])
            return select_tasks(tasks, limit=limit, difficulty=difficulty)
        return load_tasks(dataset, split=split, limit=limit, difficulty=difficulty, path=path)
    except DatasetError as exc:
        raise ConfigError(f"dataset {dataset!r}: {exc}") from None


def training_tasks(config: TrainConfig) -> list[Task]:
    """The tasks GRPO trains on (``--dataset``, ``--split``, ``--limit``, ``--difficulty``), each as a training
    prompt shows it: never one whose prompt, with the tests the run's feedback shows (``--task code-repair``'s
    ``--public-tests``, with or without ``--tools``), shows every test that judges it (``Task.for_training``)."""
    loaded = _load(config.dataset, config.dataset_path, config.split, config.limit, config.difficulty)
    shown = config.public_tests if config.task == "code-repair" else 0
    tasks = [t for t in (task.for_training(shown) for task in loaded) if t is not None]
    if len(tasks) < len(loaded):
        log.warning(
            "dataset %r: %d of %d tasks left out of training: their prompts (with the tests a repair's feedback "
            "shows) show every test that judges them, which a lookup table of the answers would pass",
            config.dataset,
            len(loaded) - len(tasks),
            len(loaded),
        )
    if not tasks:
        raise ConfigError(f"dataset {config.dataset!r} gave no training tasks (check --split/--difficulty/--limit)")
    return tasks


def heldout_tasks(config: TrainConfig) -> list[Task]:
    """The held-out tasks of the interval evaluation."""
    return _load(config.eval_dataset, config.eval_path, config.eval_split, config.eval_limit, None)


def prompt_of(task: Task, *, chat: bool) -> Any:
    """What the policy is shown: chat messages for a model with a chat template, else a plain prompt."""
    return chat_messages(task) if chat else base_prompt(task)


def prompt_dataset(tasks: list[Task], *, chat: bool) -> Dataset:
    """One prompt per task, with the ``task_id`` column the reward reads (TRL shuffles and repeats it)."""
    return Dataset.from_list([{"prompt": prompt_of(t, chat=chat), "task_id": t.task_id} for t in tasks])
