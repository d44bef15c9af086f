"""What a synthesis run did: every candidate counted once, as kept or under the first reason it was rejected."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from statistics import mean, median
from typing import Any

from .parse import MALFORMED

# Every rejection reason, in the order the checks run: a candidate is counted under the first that applies.
REASONS: dict[str, str] = {
    "model_error": "the model endpoint failed on the request (after its retries)",
    **MALFORMED,
    "copied_prompt": "the problem or solution is the prompt's example or seed problem",
    "too_few_tests": "fewer asserts calling the function than --min-tests",
    "trivial_constant": "every return of the reference gives the same literal",
    "sandbox_error": "the sandbox could not judge the reference, its stand-ins or its mutants",
    "reference_fails": "the reference solution fails its own tests",
    "passes_with_none": "a function that returns None passes every test",
    "passes_with_identity": "a function that returns its first argument passes every test",
    "no_mutants": "no mutant of the reference compiles and differs from it",
    "weak_tests": "the tests kill fewer mutants than --min-mutation-score",
    "duplicate_solution": "the reference is a kept one up to names, layout and docstrings",
    "duplicate_problem": "the statement is a near-duplicate of a kept one's",
}


@dataclass
class OperatorStats:
    """Mutants of one operator over every candidate whose mutants were judged."""

    mutants: int = 0
    killed: int = 0

    @property
    def kill_rate(self) -> float | None:
        return self.killed / self.mutants if self.mutants else None


@dataclass
class SynthesisReport:
    """The counts of a run: candidates asked for, kept, rejected by reason; mutation scores; per-operator kills."""

    model: str
    seed: int
    settings: dict[str, Any]
    candidates: int = 0
    kept: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    kept_scores: list[float] = field(default_factory=list)  # mutation score of each kept problem
    judged_scores: list[float] = field(default_factory=list)  # of every candidate whose mutants were judged
    operators: dict[str, OperatorStats] = field(default_factory=dict)
    generate_s: float = 0.0
    judge_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "seed": self.seed,
            "settings": self.settings,
            "candidates": self.candidates,
            "kept": self.kept,
            "rejected": {reason: self.rejected[reason] for reason in REASONS if self.rejected[reason]},
            "mutation_score": {"kept": self.kept_scores, "judged": self.judged_scores},
            "operators": {
                name: {"mutants": s.mutants, "killed": s.killed, "kill_rate": s.kill_rate}
                for name, s in self.operators.items()
            },
            "generate_s": round(self.generate_s, 1),
            "judge_s": round(self.judge_s, 1),
        }

    def table(self) -> str:
        """Kept and every rejection reason that occurred, as a markdown table."""
        lines = ["| outcome | candidates | share |", "|---|---:|---:|"]
        total = max(self.candidates, 1)
        lines.append(f"| kept | {self.kept} | {self.kept / total:.0%} |")
        for reason in REASONS:
            if self.rejected[reason]:
                lines.append(f"| {reason} | {self.rejected[reason]} | {self.rejected[reason] / total:.0%} |")
        return "\n".join(lines)

    @staticmethod
    def _scores(scores: list[float]) -> str:
        if not scores:
            return "none"
        return f"{len(scores)}, mean {mean(scores):.2f}, median {median(scores):.2f}, lowest {min(scores):.2f}"

    def markdown(self) -> str:
        """The whole report: settings, the outcome table, mutation scores and the operators' kill rates."""
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        operator_lines = ["| operator | mutants | killed | kill rate |", "|---|---:|---:|---:|"]
        for name, s in self.operators.items():
            rate = f"{s.kill_rate:.0%}" if s.kill_rate is not None else "-"
            operator_lines.append(f"| {name} | {s.mutants} | {s.killed} | {rate} |")
        reasons = [f"- *{r}*: {why}" for r, why in REASONS.items() if self.rejected[r]]
        if reasons:
            reasons = ["Each candidate is counted once, under the first check it failed:", "", *reasons, ""]
        return "\n".join(
            [
                f"# Synthesized problems from {self.model} (seed {self.seed})",
                "",
                f"{self.candidates} candidates, {self.kept} kept. Generation {self.generate_s:.0f} s, judging "
                f"{self.judge_s:.0f} s. Settings: {settings}.",
                "",
                self.table(),
                "",
                *reasons,
                f"Mutation scores (share of mutants killed), kept problems: {self._scores(self.kept_scores)}; "
                f"every candidate whose mutants were judged: {self._scores(self.judged_scores)}.",
                "",
                "Mutants by operator, over every candidate whose mutants were judged:",
                "",
                *operator_lines,
                "",
            ]
        )
