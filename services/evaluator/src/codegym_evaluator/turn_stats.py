"""pass@1 after each round of feedback (``--turns``), from every turn's results.

A sample is *solved by turn t* when one of its answers of turns ``1..t`` passed every test; once solved it is
not asked again. Its state at turn ``t`` is known when it was solved by then or one of its answers of turns
``1..t`` was judged: a wrong answer stands until a later one is judged, so a sample not asked again (its task
shows no test, its feedback could not be run, a stopped run never asked it) counts as wrong, never drops out.
A sample none of whose answers the sandbox could judge (SE) is left out, as SE samples are left out of pass@k.
pass@1 after turn ``t`` is the mean over tasks of the share of their known samples solved by then (the unbiased
pass@1, ``c / n``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from codegym_sandbox.verdicts import Verdict

from .tasks import Task


@dataclass
class TurnStats:
    """One turn over all tasks."""

    turn: int
    pass_at_1: float | None  # mean over tasks of solved / known, for tasks with a known sample
    known: int  # samples whose state at this turn is known
    solved: int  # samples solved by this turn
    asked: int  # samples answered again at this turn (their previous answer failed), and judged
    fixed: int  # of those, the ones whose new answer passed
    sandbox_errors: int  # answers of this turn the sandbox could not judge

    @property
    def fix_rate(self) -> float | None:
        return self.fixed / self.asked if self.asked else None


@dataclass
class TurnsSummary:
    """Every turn's stats, the mean turns a sample used, and where the feedback's tests came from."""

    max_turns: int
    by_turn: list[TurnStats]
    mean_turns_used: float | None
    feedback: dict[str, int] = field(default_factory=dict)  # how many tasks' feedback showed public tests, or not

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the ``turns`` of ``summary.json``."""
        return {
            "max_turns": self.max_turns,
            "by_turn": [{**asdict(t), "fix_rate": t.fix_rate} for t in self.by_turn],
            "mean_turns_used": self.mean_turns_used,
            "feedback": self.feedback,
        }


def turns_summary(
    tasks: Iterable[Task],
    rows: Mapping[tuple[str, int, int], Mapping[str, Any]],
    max_turns: int,
) -> TurnsSummary:
    """The per-turn summary of ``tasks`` from results lines keyed by (task, sample, turn)."""
    tasks = list(tasks)
    samples: dict[str, dict[int, dict[int, str]]] = {}  # task -> sample -> turn -> verdict
    for (task_id, i, turn), row in rows.items():
        if turn <= max_turns:
            samples.setdefault(task_id, {}).setdefault(i, {})[turn] = str(row["verdict"])
    by_turn: list[TurnStats] = []
    for turn in range(1, max_turns + 1):
        shares: list[float] = []
        stats = TurnStats(turn, None, 0, 0, 0, 0, 0)
        for task in tasks:
            known = solved = 0
            for verdicts in samples.get(task.task_id, {}).values():
                done = any(verdicts.get(t) == Verdict.AC for t in range(1, turn + 1))
                here = verdicts.get(turn)
                # A wrong answer stands until a later one is judged: a sample not asked again (its task shows no
                # test, or its feedback could not be run) stays wrong, and out of the count only if none was judged.
                judged = any(verdicts.get(t) not in (None, Verdict.SE) for t in range(1, turn + 1))
                known += done or judged
                solved += done
                stats.sandbox_errors += here == Verdict.SE
                if turn > 1 and here is not None and here != Verdict.SE:
                    stats.asked += 1
                    stats.fixed += here == Verdict.AC
            stats.known += known
            stats.solved += solved
            if known:
                shares.append(solved / known)
        stats.pass_at_1 = sum(shares) / len(shares) if shares else None
        by_turn.append(stats)
    used = [_turns_used(v) for s in samples.values() for v in s.values() if v.get(1, Verdict.SE) != Verdict.SE]
    public = sum(1 for t in tasks if t.public_tests is not None)
    feedback = {"tasks_shown_public_tests": public, "tasks_shown_judging_tests": len(tasks) - public}
    return TurnsSummary(max_turns, by_turn, sum(used) / len(used) if used else None, feedback)


def _turns_used(verdicts: Mapping[int, str]) -> int:
    """The turn a sample passed, or its last judged answer's turn."""
    judged = sorted(t for t, v in verdicts.items() if v != Verdict.SE)
    passed = [t for t in judged if verdicts[t] == Verdict.AC]
    return passed[0] if passed else judged[-1] if judged else 1
