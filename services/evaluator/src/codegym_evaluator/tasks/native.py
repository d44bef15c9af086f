"""codegym's own task format: one JSON object a line with exactly the fields of ``Task``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .model import KINDS, Task
from .sources import DatasetError, iter_jsonl

FIELDS = {f.name for f in dataclasses.fields(Task)}
REQUIRED = {"task_id", "prompt", "kind", "tests"}


def task_from_dict(row: dict[str, Any], where: str = "") -> Task:
    """A task from a dict of Task fields; a bad row raises naming ``where`` and what is wrong."""
    prefix = f"{where}: " if where else ""
    unknown = sorted(set(row) - FIELDS)
    if unknown:
        raise DatasetError(f"{prefix}unknown task fields {unknown}; allowed: {sorted(FIELDS)}")
    missing = sorted(REQUIRED - set(row))
    if missing:
        raise DatasetError(f"{prefix}missing task fields {missing}")
    if row["kind"] not in KINDS:
        raise DatasetError(f"{prefix}kind must be one of {list(KINDS)}, not {row['kind']!r}")
    if not isinstance(row["tests"], list) or not all(isinstance(t, dict) for t in row["tests"]):
        raise DatasetError(f"{prefix}tests must be a list of objects")
    try:
        return Task(**row)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{prefix}{exc}") from None


class NativeAdapter:
    """Rows already in codegym's task format."""

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        tests: list[dict[str, Any]] = sample["tests"]
        return tests

    def format_problem(self, sample: dict[str, Any]) -> str:
        return str(sample["prompt"])

    def to_task(self, sample: dict[str, Any], index: int) -> Task:
        return task_from_dict(sample, f"row {index + 1}")


def read_task_file(path: str | Path) -> list[Task]:
    """Tasks of a codegym JSONL task file; errors name the file and line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    return [task_from_dict(row, f"{p}:{lineno}") for lineno, row in iter_jsonl(p)]


def write_task_file(tasks: list[Task], path: str | Path) -> None:
    """Write tasks in codegym's JSONL task format (what ``read_task_file`` reads back)."""
    import json

    with Path(path).open("w", encoding="utf-8") as fh:
        for task in tasks:
            fh.write(json.dumps(task.to_dict()) + "\n")
