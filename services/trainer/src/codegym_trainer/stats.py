"""The statistics that let a pass@1 carry a claim: a bootstrap interval over problems (Wilson's for one greedy
answer each), mean and spread of seeds.

A held-out set of a few dozen problems moves by whole problems: one more solved out of 8 is +0.125. The
interval resamples the problems (each problem's own pass rate is kept), which is what varies when one asks
"would another set of problems like these show the same?"; it says nothing of the spread between seeds,
which ``mean_sd`` over runs answers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Interval:
    """A mean and its two-sided confidence interval."""

    mean: float
    low: float
    high: float
    confidence: float

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def bootstrap_interval(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Interval:
    """Percentile bootstrap of the mean of ``values`` (one per problem: its pass rate over its samples).

    Seeded, so a report is reproducible. One value, or values all alike, give a zero-width interval:
    there is nothing to resample, not certainty, and the caller's problem count says so.
    """
    if not values:
        raise ValueError("no values to make an interval of")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    n = len(values)
    mean = sum(values) / n
    rng = random.Random(seed)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return Interval(mean, min(low, mean), max(high, mean), confidence)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Wilson's score interval of a pass rate from ``successes`` of ``n`` pass/fail outcomes.

    For one greedy answer per problem (each outcome 0 or 1) it is the honest interval: 8 of 8 solved is
    about [0.68, 1.00], where a bootstrap of eight ones has nothing to resample and says [1.00, 1.00].
    """
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, not {successes} of {n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), confidence)


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def over_seeds(changes: Sequence[float]) -> str:
    """What a change measured once per seed supports: it holds only when every seed gains and the mean
    exceeds the sd; a loss holds likewise (every seed lost, by more than the sd); one seed cannot tell; a
    mean at or below 0 is no gain; anything else is seed noise."""
    mean, sd = mean_sd(changes)
    if len(changes) < 2:
        return "one seed cannot separate learning from noise"
    if all(c > 0 for c in changes) and mean > sd:
        return "the gain holds over seeds"
    if all(c < 0 for c in changes) and -mean > sd:
        return "a loss that holds over seeds: training made it worse"
    if mean <= 0:
        return "no gain (a null result)"
    return "the gain does not hold over seeds (within seed noise)"
