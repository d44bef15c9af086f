"""Per-verdict rates of a batch of judged completions (logged every step as ``verdicts/*``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from codegym_sandbox.verdicts import Verdict

# The rates always logged, even when zero, so their time series have no holes.
TRACKED = (Verdict.AC, Verdict.WA, Verdict.CE, Verdict.TLE, Verdict.RE, Verdict.MLE, Verdict.OLE, Verdict.SE)


@dataclass
class VerdictStats:
    """Counts of verdicts in one batch; ``rates`` names them as logged (``verdicts/pass`` for AC)."""

    counts: Counter[Verdict] = field(default_factory=Counter)

    @classmethod
    def of(cls, verdicts: Iterable[Verdict | str]) -> VerdictStats:
        return cls(Counter(Verdict(v) for v in verdicts))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def rates(self) -> dict[str, float]:
        """Share of the batch with each verdict; AC is reported as ``pass``.

        >>> VerdictStats.of([Verdict.AC, Verdict.AC, Verdict.CE, Verdict.SE]).rates()["verdicts/pass"]
        0.5
        """
        n = self.total or 1
        return {f"verdicts/{'pass' if v is Verdict.AC else v}": self.counts.get(v, 0) / n for v in TRACKED}
