"""Named datasets: where their rows come from and which adapter turns a row into a task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .apps import APPSAdapter
from .code_contests import CodeContestsAdapter
from .humaneval import HumanEvalAdapter, packaged_path
from .livecodebench import LiveCodeBenchAdapter
from .mbpp import MBPPAdapter
from .model import Task, TestAdapter
from .native import NativeAdapter, read_task_file
from .sources import DatasetError, iter_jsonl, read_hub, read_local


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset codegym knows by name."""

    name: str
    adapter: TestAdapter
    hub_id: str | None
    hub_config: str | None = None
    default_split: str = "test"
    offline: Callable[[], Path | None] | None = None  # a copy that ships with an installed package


DATASETS: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> None:
    """Make a dataset loadable by name (later registrations replace earlier ones)."""
    DATASETS[spec.name] = spec


register(DatasetSpec("humaneval", HumanEvalAdapter(), "openai/openai_humaneval", offline=packaged_path))
register(DatasetSpec("mbpp", MBPPAdapter(), "google-research-datasets/mbpp", "full"))
register(DatasetSpec("mbpp-sanitized", MBPPAdapter(), "google-research-datasets/mbpp", "sanitized"))
register(DatasetSpec("apps", APPSAdapter(), "codeparrot/apps"))
register(DatasetSpec("code_contests", CodeContestsAdapter(), "deepmind/code_contests"))
register(DatasetSpec("livecodebench", LiveCodeBenchAdapter(), "livecodebench/code_generation_lite"))
register(DatasetSpec("jsonl", NativeAdapter(), None))


def load_tasks(
    dataset: str,
    *,
    split: str | None = None,
    limit: int | None = None,
    difficulty: str | None = None,
    path: str | Path | None = None,
) -> list[Task]:
    """Tasks of a named dataset, from ``path`` when given (a file or directory), else offline or the hub.

    ``difficulty`` keeps tasks of that difficulty (APPS: introductory, interview, competition); ``limit``
    keeps the first tasks after filtering. A path ending in ``.jsonl`` is read in codegym's task format
    when its rows have the task fields (``kind`` and ``tests``), else as rows of ``dataset``.
    """
    spec = DATASETS.get(dataset)
    if spec is None:
        raise DatasetError(f"unknown dataset {dataset!r}; known: {', '.join(sorted(DATASETS))}")
    if spec.name == "jsonl" or (path is not None and _is_task_file(path)):
        if path is None:
            raise DatasetError("the jsonl dataset needs a path to a codegym task file")
        tasks = read_task_file(path)
    else:
        split = split or spec.default_split
        if path is not None:
            rows = read_local(path, split)
        elif spec.offline is not None and (local := spec.offline()) is not None:
            rows = read_local(local)
        elif spec.hub_id is not None:
            rows = read_hub(spec.hub_id, spec.hub_config, split)
        else:
            raise DatasetError(f"dataset {dataset!r} has no hub id: pass a local file or directory")
        tasks = [t for i, row in enumerate(rows) if (t := spec.adapter.to_task(row, i)) is not None]
    return select_tasks(tasks, difficulty=difficulty, limit=limit, dataset=dataset)


def _is_task_file(path: str | Path) -> bool:
    p = Path(path).expanduser()
    if not (p.is_file() and p.name.endswith(".jsonl")):
        return False
    for _, row in iter_jsonl(p):
        return {"kind", "tests", "prompt", "task_id"} <= set(row)
    return False


def select_tasks(
    tasks: list[Task], *, difficulty: str | None = None, limit: int | None = None, dataset: str = "the dataset"
) -> list[Task]:
    """The tasks of ``difficulty`` (an unknown one raises, listing those there are), then the first ``limit``."""
    if difficulty is not None:
        kept = [t for t in tasks if t.difficulty == difficulty]
        if tasks and not kept:
            known = ", ".join(sorted({t.difficulty for t in tasks if t.difficulty is not None})) or "none"
            raise DatasetError(f"no task of difficulty {difficulty!r} in {dataset}; its difficulties: {known}")
        tasks = kept
    return tasks[:limit] if limit is not None else tasks
