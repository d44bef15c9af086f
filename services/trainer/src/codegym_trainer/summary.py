"""The end of a run: a reward curve (PNG), pass@1 before and after, the time split, in ``summary.json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codegym_sandbox.verdicts import Verdict

from .evaluation import EvalPoint
from .logs import read_metrics


@dataclass
class RunSummary:
    """What a run achieved; written as ``summary.json`` and printed."""

    steps: int
    rewards: list[tuple[int, float]]
    evals: list[EvalPoint]
    seconds: float
    time_split: dict[str, float] = field(default_factory=dict)
    masked_rewards: int = 0
    final_model: str | None = None
    plot: str | None = None

    @property
    def pass_before(self) -> float | None:
        return self.evals[0].pass_at_1 if self.evals else None

    @property
    def pass_after(self) -> float | None:
        return self.evals[-1].pass_at_1 if len(self.evals) > 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 1),
            "pass_at_1_before": self.pass_before,
            "pass_at_1_after": self.pass_after,
            "reading": self.reading(),
            "evaluations": [asdict(p) for p in self.evals],
            "rewards": self.rewards,
            "time_split": self.time_split,
            "masked_rewards": self.masked_rewards,
            "final_model": self.final_model,
            "plot": self.plot,
        }

    def reading(self) -> list[str]:
        """What to read from this run, first: the held-out result and what the reward curve can show."""
        out = []
        if len(self.evals) > 1:
            before, after = self.evals[0], self.evals[-1]
            out.append(
                f"the result is held-out pass@1, before -> after training: {_point(before)} -> {_point(after)} "
                f"on {after.tasks} problems the model never trained on (the brackets: a 95% interval)"
            )
        if self.steps < NOISY_STEPS:
            out.append(
                f"the reward curve is {self.steps} steps of a few completions each: its ups and downs are "
                "sampling noise, not learning; a curve shows a trend over hundreds of steps"
            )
        return out

    def lines(self) -> list[str]:
        """Human-readable summary lines: what to read first, then the numbers."""

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        first = self.rewards[: max(1, len(self.rewards) // 4)]
        last = self.rewards[-max(1, len(self.rewards) // 4) :]
        out = [
            *(f"read this: {line}" for line in self.reading()),
            f"steps: {self.steps} in {self.seconds / 60:.1f} min",
            f"mean reward, first quarter -> last quarter: {_mean(first):.3f} -> {_mean(last):.3f}",
        ]
        if len(self.evals) > 1:
            before, after = self.evals[0], self.evals[-1]
            out.append(f"held-out pass@1 before: {before.describe()}")
            out.append(f"held-out pass@1 after:  {after.describe()}")
            out.append(f"greedy verdicts before -> after: {verdict_shift(before.verdicts, after.verdicts)}")
            out.append(caution(before, after))
        else:
            out.append(f"held-out pass@1 before -> after: {pct(self.pass_before)} -> {pct(self.pass_after)}")
        if self.time_split:
            share = self.time_split.get("scoring_share", 0.0)
            out.append(
                "time per step: generation {generation:.1f}s, scoring {scoring:.2f}s, optimisation "
                "{optimisation:.1f}s".format(**self.time_split)
                + f" (waiting for rewards: {share:.1%})"
            )
        if self.masked_rewards:
            out.append(f"masked rewards (sandbox errors): {self.masked_rewards}")
        if self.plot:
            out.append(f"reward curve: {self.plot}")
        if self.final_model:
            out.append(f"final model: {self.final_model}")
        return out


# Fewer training steps than this make a reward curve whose shape is noise (a group of a few completions a step).
NOISY_STEPS = 100


def _point(p: EvalPoint) -> str:
    text = f"{p.pass_at_1:.3f}"
    return text + (f" [{p.interval[0]:.3f}, {p.interval[1]:.3f}]" if p.interval is not None else "")


def verdict_shift(before: dict[str, int], after: dict[str, int]) -> str:
    """``AC 2 -> 7, CE 3 -> 0, ...``: every verdict either point saw."""
    names = sorted(set(before) | set(after), key=lambda v: (v != Verdict.AC, v))  # read back from JSON: strings
    return ", ".join(f"{v} {before.get(v, 0)} -> {after.get(v, 0)}" for v in names)


def caution(before: EvalPoint, after: EvalPoint) -> str:
    """What one run's before/after can and cannot show, in one line."""
    change = after.pass_at_1 - before.pass_at_1
    ce_fixed = before.verdicts.get(Verdict.CE, 0) - after.verdicts.get(Verdict.CE, 0)
    text = (
        f"one run, one seed, {after.tasks} held-out problems: a change of one problem is {1 / max(1, after.tasks):.3f}"
    )
    overlap = (
        before.interval is not None
        and after.interval is not None
        and before.interval[1] >= after.interval[0]
        and after.interval[1] >= before.interval[0]
    )
    if overlap:
        text += f"; the intervals overlap, so this {change:+.3f} does not show learning"
    if ce_fixed > 0 and change > 0:
        text += f"; {ce_fixed} fewer compile errors: part of any gain may be format, not correctness"
    return text + " (bench/learning_curve.py measures over seeds)"


def _mean(points: list[tuple[int, float]]) -> float:
    return sum(r for _, r in points) / len(points) if points else float("nan")


def rewards_from_metrics(metrics_file: Path) -> list[tuple[int, float]]:
    """(step, mean reward) of every logged training step."""
    return [
        (int(r["step"]), float(r["reward"]))
        for r in read_metrics(metrics_file)
        if r.get("kind") == "train" and r.get("reward") is not None
    ]


def time_split(metrics_file: Path) -> dict[str, float]:
    """Mean seconds per step in generation, scoring and optimisation, and the share spent scoring."""
    rows = [r for r in read_metrics(metrics_file) if r.get("kind") == "train" and r.get("time/generation") is not None]
    if not rows:
        return {}
    mean = {k: sum(float(r[f"time/{k}"]) for r in rows) / len(rows) for k in ("generation", "scoring", "optimisation")}
    total = sum(mean.values())
    mean["scoring_share"] = mean["scoring"] / total if total else 0.0
    return mean


def plot_rewards(rewards: list[tuple[int, float]], evals: list[EvalPoint], path: Path) -> Path:
    """The reward curve and held-out pass@1 with its interval as a PNG, titled with what to read from it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if rewards:
        steps, values = zip(*rewards, strict=True)
        ax.plot(steps, values, marker="o", markersize=3, label="mean reward")
        window = max(2, len(values) // 5)
        if len(values) >= 2 * window:
            smooth = [sum(values[max(0, i - window + 1) : i + 1]) / min(i + 1, window) for i in range(len(values))]
            ax.plot(steps, smooth, linewidth=2, label=f"running mean ({window} steps)")
    if evals:
        below = [p.pass_at_1 - p.interval[0] if p.interval else 0.0 for p in evals]
        above = [p.interval[1] - p.pass_at_1 if p.interval else 0.0 for p in evals]
        ax.errorbar(
            [p.step for p in evals],
            [p.pass_at_1 for p in evals],
            yerr=[below, above],
            fmt="s--",
            capsize=4,
            label="held-out pass@1 (95% interval)",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("reward / pass@1")
    points = len(rewards)
    if evals and points < NOISY_STEPS:
        title = (
            f"The result: held-out pass@1 before and after (bars: 95% interval).\n{points} steps of reward are noise."
        )
    else:
        title = "GRPO on code: reward per step, and held-out pass@1"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
