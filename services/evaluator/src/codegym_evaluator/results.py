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
    Every line has a ``turn``: 1 for a first answer, ``t`` for the answer after ``t - 1`` rounds of feedback
    (``--turns``; a later turn's completion line also keeps the ``feedback`` the model read). Lines without
    one (older runs) are first answers.
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.dir / RESULTS
        self.completions_path = self.dir / COMPLETIONS

    def check_run(self, identity: dict[str, Any], extent: dict[str, Any] | None = None) -> None:
        """Record what this run evaluates; refuse to resume a directory that holds a different run. ``extent``
        (how far the run goes: its turns) is recorded too but may change: a resumed run may go further."""
        path = self.dir / RUN
        if path.exists():
            old = json.loads(path.read_text())
            changed = sorted(k for k in identity if k in old and old[k] != identity[k])
            if changed:
                raise DatasetError(
                    f"{self.dir} holds another run ({', '.join(f'{k}: {old[k]!r}' for k in changed)}); "
                    "resume with the same settings or choose another --output"
                )
        path.write_text(json.dumps({**identity, **(extent or {})}, indent=2) + "\n")

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
        """The first answers' results, by (task, sample)."""
        return {(t, i): r for (t, i, turn), r in self.turn_results().items() if turn == 1}

    def completions(self) -> dict[tuple[str, int], str]:
        """The first answers, by (task, sample)."""
        return {(t, i): str(r["completion"]) for (t, i, turn), r in self.turn_completions().items() if turn == 1}

    def turn_results(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        """Every turn's results, by (task, sample, turn)."""
        return {_key(r): r for r in self._read(self.results_path)}

    def turn_completions(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        """Every turn's completion lines, by (task, sample, turn)."""
        return {_key(r): r for r in self._read(self.completions_path)}

    @staticmethod
    def _append(path: Path, rows: Iterable[dict[str, Any]]) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
            fh.flush()

    def add_completions(self, task_id: str, items: Iterable[tuple[int, str]]) -> None:
        self._append(
            self.completions_path, ({"task_id": task_id, "sample": i, "turn": 1, "completion": c} for i, c in items)
        )

    def add_repair(self, task_id: str, sample: int, turn: int, feedback: str, completion: str) -> None:
        """A later turn's answer, with the feedback it answered."""
        row = {"task_id": task_id, "sample": sample, "turn": turn, "feedback": feedback, "completion": completion}
        self._append(self.completions_path, [row])

    def add_results(self, task: Task, items: Iterable[tuple[int, str, Score]], turn: int = 1) -> list[dict[str, Any]]:
        """Append the judged samples of one turn; the lines written."""
        rows = []
        for i, completion, score in items:
            row: dict[str, Any] = {"task_id": task.task_id, "sample": i, "turn": turn, "difficulty": task.difficulty}
            row.update({k: getattr(score, k) for k in SCORE_FIELDS})
            row["completion"] = completion
            rows.append(row)
        self._append(self.results_path, rows)
        return rows


def _key(row: dict[str, Any]) -> tuple[str, int, int]:
    return row["task_id"], int(row["sample"]), int(row.get("turn") or 1)


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
