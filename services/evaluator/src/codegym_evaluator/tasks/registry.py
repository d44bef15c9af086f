"""Named datasets: where their rows come from and which adapter turns a row into a task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import apps, code_contests, humaneval, leetcode, livecodebench, mbpp, taco
from .apps import APPSAdapter
from .code_contests import CodeContestsAdapter
from .hub import HubLayout, read_repo
from .humaneval import HumanEvalAdapter, packaged_path
from .leetcode import LeetCodeAdapter
from .livecodebench import LiveCodeBenchAdapter
from .mbpp import MBPPAdapter
from .model import Task, TestAdapter
from .native import NativeAdapter, read_task_file
from .sources import DatasetError, iter_jsonl, read_local
from .taco import TACOAdapter


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset codegym knows by name."""

    name: str
    adapter: TestAdapter
    hub: HubLayout | None  # its files in its hub repository (see ``hub``)
    default_split: str = "test"
    offline: Callable[[], Path | None] | None = None  # a copy that ships with an installed package


DATASETS: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> None:
    """Make a dataset loadable by name (later registrations replace earlier ones)."""
    DATASETS[spec.name] = spec


register(DatasetSpec("humaneval", HumanEvalAdapter(), humaneval.HUB, offline=packaged_path))
register(DatasetSpec("mbpp", MBPPAdapter(), mbpp.HUB_FULL))
register(DatasetSpec("mbpp-sanitized", MBPPAdapter(), mbpp.HUB_SANITIZED))
register(DatasetSpec("apps", APPSAdapter(), apps.HUB))
register(DatasetSpec("code_contests", CodeContestsAdapter(), code_contests.HUB))
register(DatasetSpec("livecodebench", LiveCodeBenchAdapter(), livecodebench.HUB, default_split=livecodebench.LATEST))
register(DatasetSpec("taco", TACOAdapter(), taco.HUB))
register(DatasetSpec("leetcode", LeetCodeAdapter(), leetcode.HUB))
register(DatasetSpec("jsonl", NativeAdapter(), None))


def load_tasks(
    dataset: str,
    *,
    split: str | None = None,
    limit: int | None = None,
    difficulty: str | None = None,
    path: str | Path | None = None,
    hub_root: str | Path | None = None,
) -> list[Task]:
    """Tasks of a named dataset, from ``path`` when given (a file or directory), else offline or the hub.

    ``difficulty`` keeps tasks of that difficulty (APPS: introductory, interview, competition); ``limit``
    keeps the first tasks after filtering. A path ending in ``.jsonl`` is read in codegym's task format
    when its rows have the task fields (``kind`` and ``tests``), else as rows of ``dataset``. Without a
    path, the dataset's files are read from ``hub_root`` (see ``hub.read_repo``: the hub, or a local
    directory laid out as the hub; default ``$CODEGYM_HUB_ROOT``, else the hub).
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
        elif spec.hub is not None:
            rows = read_repo(spec.hub, split, hub_root)
        else:
            raise DatasetError(f"dataset {dataset!r} has no hub repository: pass a local file or directory")
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
