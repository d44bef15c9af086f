"""Scoring many tasks' completions and summarising them: pass@k, per task, per difficulty, verdicts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codegym_sandbox.verdicts import Verdict

from .passk import pass_at_k
from .scoring import Score, Scorer
from .tasks import Task


@dataclass
class TaskResult:
    """One task's samples. Those the sandbox failed (the program, or any one of its tests: ``Score.judged``, the
    predicate every reward masks by) are left out of ``n``: they say nothing about the program."""

    task_id: str
    difficulty: str | None
    scores: list[Score]

    @property
    def n(self) -> int:
        return sum(1 for s in self.scores if s.judged)

    @property
    def correct(self) -> int:
        return sum(1 for s in self.scores if s.verdict is Verdict.AC)

    @property
    def sandbox_errors(self) -> int:
        return sum(1 for s in self.scores if not s.judged)

    def pass_at(self, k: int) -> float | None:
        """pass@k of this task, or None with fewer than k judged samples."""
        return pass_at_k(self.n, self.correct, k) if self.n >= k else None

    def to_dict(self, ks: Sequence[int]) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "difficulty": self.difficulty,
            "n": self.n,
            "correct": self.correct,
            "sandbox_errors": self.sandbox_errors,
            "verdicts": dict(Counter(s.verdict for s in self.scores)),
            "pass_at_k": {str(k): self.pass_at(k) for k in ks},
        }


def mean_pass_at_k(results: Iterable[TaskResult], k: int) -> float | None:
    """Mean pass@k over the tasks with at least k judged samples; None when there are none."""
    values = [v for r in results if (v := r.pass_at(k)) is not None]
    return sum(values) / len(values) if values else None


@dataclass
class EvalSummary:
    """pass@k over all tasks (tasks with fewer than k judged samples are left out of that k)."""

    ks: tuple[int, ...]
    per_task: dict[str, TaskResult]
    pass_at_k: dict[int, float] = field(default_factory=dict)
    per_difficulty: dict[str, dict[int, float]] = field(default_factory=dict)
    verdict_counts: dict[str, int] = field(default_factory=dict)
    sandbox_errors: int = 0

    @classmethod
    def from_results(cls, results: Iterable[TaskResult], ks: Sequence[int] = (1,)) -> EvalSummary:
        per_task = {r.task_id: r for r in results}
        summary = cls(ks=tuple(ks), per_task=per_task)
        for k in ks:
            if (v := mean_pass_at_k(per_task.values(), k)) is not None:
                summary.pass_at_k[k] = v
        groups: dict[str, list[TaskResult]] = {}
        for r in per_task.values():
            if r.difficulty is not None:
                groups.setdefault(r.difficulty, []).append(r)
        for name, members in sorted(groups.items()):
            summary.per_difficulty[name] = {k: v for k in ks if (v := mean_pass_at_k(members, k)) is not None}
        counts = Counter(s.verdict for r in per_task.values() for s in r.scores)
        summary.verdict_counts = dict(sorted(counts.items()))
        summary.sandbox_errors = sum(r.sandbox_errors for r in per_task.values())
        return summary

    @property
    def samples(self) -> int:
        return sum(len(r.scores) for r in self.per_task.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what ``summary.json`` holds."""
        return {
            "tasks": len(self.per_task),
            "samples": self.samples,
            "pass_at_k": {f"pass@{k}": v for k, v in self.pass_at_k.items()},
            "per_difficulty": {d: {f"pass@{k}": v for k, v in p.items()} for d, p in self.per_difficulty.items()},
            "verdict_counts": self.verdict_counts,
            "sandbox_errors": self.sandbox_errors,
            "per_task": [r.to_dict(self.ks) for r in self.per_task.values()],
        }


async def evaluate_completions(
    tasks: Iterable[Task],
    completions: Mapping[str, list[str]],
    scorer: Scorer,
    *,
    ks: Sequence[int] = (1,),
    extract: bool = True,
    on_scored: Callable[[Task, list[Score]], None] | None = None,
) -> EvalSummary:
    """Judge ``completions[task_id]`` for every task (one sandbox request per task) and summarise.

    Tasks without completions are skipped. ``on_scored`` is called as each task finishes (progress bars,
    writing results as they come).
    """

    async def one(task: Task) -> TaskResult:
        scores = await scorer.score_group(task, completions[task.task_id], extract=extract)
        if on_scored is not None:
            on_scored(task, scores)
        return TaskResult(task.task_id, task.difficulty, scores)

    todo = [t for t in tasks if completions.get(t.task_id)]
    results = await asyncio.gather(*(one(t) for t in todo))
    return EvalSummary.from_results(results, ks)
