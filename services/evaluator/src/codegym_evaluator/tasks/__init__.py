"""The task library: datasets, their adapters, and codegym's own task format."""

from __future__ import annotations

from .hub import HubFiles, HubLayout
from .model import KINDS, PUBLIC_TESTS, Task, TaskKind, TestAdapter
from .native import read_task_file, task_from_dict, write_task_file
from .registry import DATASETS, DatasetSpec, load_tasks, register, select_tasks
from .sources import DatasetError

__all__ = [
    "DATASETS",
    "KINDS",
    "PUBLIC_TESTS",
    "DatasetError",
    "DatasetSpec",
    "HubFiles",
    "HubLayout",
    "Task",
    "TaskKind",
    "TestAdapter",
    "load_tasks",
    "read_task_file",
    "register",
    "select_tasks",
    "task_from_dict",
    "write_task_file",
]
