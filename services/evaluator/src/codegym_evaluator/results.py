"""The files of an evaluation run: results and completions as JSONL, appended as they come (resumable)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .evaluate import TaskResult
from .scoring import Score
from .tasks import Task
from .tasks.sources import DatasetError

RESULTS = "results.jsonl"
COMPLETIONS = "completions.jsonl"
RUN = "run.json"

SCORE_FIELDS = ("verdict", "passed", "total", "test_verdicts", "code", "fenced", "wall_s", "error")


class RunStore:
    """``results.jsonl`` (one line per judged sample) and ``completions.jsonl`` (one per generated sample).

    Lines are only appended; when a sample appears twice (a re-run of a sandbox error) the last line wins.
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.dir / RESULTS
        self.completions_path = self.dir / COMPLETIONS

    def check_run(self, identity: dict[str, Any]) -> None:
        """Record what this run evaluates; refuse to resume a directory that holds a different run."""
        path = self.dir / RUN
        if path.exists():
            old = json.loads(path.read_text())
            changed = sorted(k for k in identity if k in old and old[k] != identity[k])
            if changed:
                raise DatasetError(
                    f"{self.dir} holds another run ({', '.join(f'{k}: {old[k]!r}' for k in changed)}); "
                    "resume with the same settings or choose another --output"
                )
        path.write_text(json.dumps(identity, indent=2) + "\n")

    @staticmethod
    def _read(path: Path) -> Iterable[dict[str, Any]]:
        if not path.exists():
            return
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash: that sample is simply done again
                if isinstance(row, dict) and "task_id" in row and "sample" in row:
                    yield row

    def results(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {(r["task_id"], int(r["sample"])): r for r in self._read(self.results_path)}

    def completions(self) -> dict[tuple[str, int], str]:
        return {(r["task_id"], int(r["sample"])): str(r["completion"]) for r in self._read(self.completions_path)}

    @staticmethod
    def _append(path: Path, rows: Iterable[dict[str, Any]]) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
            fh.flush()

    def add_completions(self, task_id: str, items: Iterable[tuple[int, str]]) -> None:
        self._append(self.completions_path, ({"task_id": task_id, "sample": i, "completion": c} for i, c in items))

    def add_results(self, task: Task, items: Iterable[tuple[int, str, Score]]) -> None:
        rows = []
        for i, completion, score in items:
            row: dict[str, Any] = {"task_id": task.task_id, "sample": i, "difficulty": task.difficulty}
            row.update({k: getattr(score, k) for k in SCORE_FIELDS})
            row["completion"] = completion
            rows.append(row)
        self._append(self.results_path, rows)


def score_of(row: dict[str, Any]) -> Score:
    """A ``Score`` back from a results line."""
    return Score(**{k: row.get(k) for k in SCORE_FIELDS})  # type: ignore[arg-type]


def task_results(tasks: Iterable[Task], rows: dict[tuple[str, int], dict[str, Any]]) -> list[TaskResult]:
    """Each task's judged samples (in sample order), for the tasks that have any."""
    by_task: dict[str, list[tuple[int, Score]]] = {}
    for (task_id, i), row in rows.items():
        by_task.setdefault(task_id, []).append((i, score_of(row)))
    out = []
    for task in tasks:
        if task.task_id in by_task:
            scores = [s for _, s in sorted(by_task[task.task_id], key=lambda p: p[0])]
            out.append(TaskResult(task.task_id, task.difficulty, scores))
    return out
