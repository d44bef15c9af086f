"""What a code-repair step logs: pass rates after each turn, turns used, and what the feedback did."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from codegym_evaluator.scoring import Score
from codegym_sandbox.verdicts import Verdict


def repair_metrics(
    public_passed: Sequence[Sequence[int]], public_totals: Sequence[int], final: Sequence[Score], max_turns: int
) -> dict[str, float]:
    """The step's scalars, from each conversation's public tests passed after each of its turns.

    - ``repair/pass_rate/turn_K``: the share of conversations whose answer standing after turn K passes its
      public tests (an answer that passed stands for the later turns: it is not asked again; a task that shows
      no test has none to pass);
    - ``repair/turns``: turns used, on average;
    - ``repair/fixed``: of the answers asked again, the share whose next answer passes its public tests;
    - ``repair/broke``: of the answers asked again, the share whose next answer passes fewer public tests than
      it did. A right answer is never asked again, so feedback cannot break one outright: this counts the
      partial answers it made worse;
    - ``repair/final_pass_rate``: the final answers that pass all tests, hidden ones included (of those judged).

    >>> m = repair_metrics([[1, 2], [2], [0, 0]], [2, 2, 2], [], 2)
    >>> m["repair/pass_rate/turn_1"], round(m["repair/pass_rate/turn_2"], 3), m["repair/fixed"], m["repair/broke"]
    (0.3333333333333333, 0.667, 0.5, 0.0)
    """
    n = len(public_passed)
    metrics: dict[str, float] = {}
    for k in range(1, max_turns + 1):
        standing = [
            0 < total <= p[min(k, len(p)) - 1] for p, total in zip(public_passed, public_totals, strict=True) if p
        ]
        metrics[f"repair/pass_rate/turn_{k}"] = sum(standing) / n if n else 0.0
    metrics["repair/turns"] = sum(len(p) for p in public_passed) / n if n else 0.0
    asked = fixed = broke = 0
    for passed, total in zip(public_passed, public_totals, strict=True):
        for before, after in pairwise(passed):
            asked += 1
            fixed += after >= total
            broke += after < before
    metrics["repair/asked_again"] = asked / n if n else 0.0
    metrics["repair/fixed"] = fixed / asked if asked else 0.0
    metrics["repair/broke"] = broke / asked if asked else 0.0
    judged = [s for s in final if s.verdict is not Verdict.SE]
    if judged:
        metrics["repair/final_pass_rate"] = sum(s.verdict is Verdict.AC for s in judged) / len(judged)
    return metrics
