"""What a masking run did: rows counted from tasks to emitted, and the metric distributions, as a table and JSON."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .metrics import METRICS


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric's values over a population (functions, candidate spans, emitted spans)."""

    count: int
    min: float
    p25: float
    median: float
    p75: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        """The summary; None for no values."""
        if not values:
            return None
        ordered = sorted(values)
        p25, median, p75 = (
            statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
        )
        return cls(len(ordered), ordered[0], p25, median, p75, ordered[-1], statistics.fmean(ordered))


@dataclass
class MaskCounts:
    """Every task is counted once in ``tasks``; every selected span once in ``selected``.

    ``no_solution`` + tasks with a parsed solution = ``tasks``; of the ``selected`` spans, ``reference_failed``
    + ``untested`` + ``sandbox_errors`` + ``emitted`` = ``selected``.
    """

    tasks: int = 0
    no_solution: int = 0  # no Python reference solution that parses: nothing to mask
    functions: int = 0  # functions in the reference solutions
    spans: int = 0  # spans inside their bodies
    candidates: int = 0  # spans that pass the thresholds (minimum, max_lines)
    selected: int = 0  # spans drawn: one row each
    reference_failed: int = 0  # the program with its own middle put back fails the tests: dropped
    untested: int = 0  # the tests pass with the span replaced by ``pass``: they cannot judge a fill; dropped
    sandbox_errors: int = 0  # the sandbox could not judge the row: dropped
    emitted: int = 0  # rows written to masked.jsonl


@dataclass
class MaskReport:
    """The settings of a run, its counts, and each metric's distribution over functions, candidates and rows."""

    dataset: str
    seed: int
    probability: float
    metrics: dict[str, float]
    minimum: dict[str, float] = field(default_factory=dict)
    max_lines: int | None = None
    require_tested: bool = True
    counts: MaskCounts = field(default_factory=MaskCounts)
    nodes: dict[str, int] = field(default_factory=dict)  # emitted rows per span node (If, For, FunctionDef.body...)
    distributions: dict[str, dict[str, Distribution | None]] = field(default_factory=dict)

    def measure(self, population: str, metrics: Sequence[Mapping[str, Any]]) -> None:
        """Record the distribution of every metric over ``population`` (each member's ``Metrics.to_dict()``)."""
        self.distributions[population] = {m: Distribution.of([float(x[m]) for x in metrics]) for m in METRICS}

    def count_nodes(self, nodes: Sequence[str]) -> None:
        self.nodes = dict(Counter(nodes).most_common())

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "seed": self.seed,
            "probability": self.probability,
            "metrics": self.metrics,
            "minimum": self.minimum,
            "max_lines": self.max_lines,
            "require_tested": self.require_tested,
            "counts": asdict(self.counts),
            "nodes": self.nodes,
            "distributions": {
                population: {m: asdict(d) if d else None for m, d in values.items()}
                for population, values in self.distributions.items()
            },
        }

    def table(self) -> str:
        """The counts, then one distribution table per population, in markdown."""
        c = self.counts
        lines = [
            "| tasks | no solution | functions | spans | candidates | selected | reference fails | untested "
            "| sandbox errors | emitted |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {c.tasks} | {c.no_solution} | {c.functions} | {c.spans} | {c.candidates} | {c.selected} | "
            f"{c.reference_failed} | {c.untested} | {c.sandbox_errors} | {c.emitted} |",
        ]
        for population, values in self.distributions.items():
            lines += [
                "",
                f"{population}:",
                "",
                "| metric | count | min | p25 | median | p75 | max | mean |",
                "|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for metric, d in values.items():
                if d is None:
                    lines.append(f"| {metric} | 0 | - | - | - | - | - | - |")
                else:
                    cells = " | ".join(_number(x) for x in (d.min, d.p25, d.median, d.p75, d.max, d.mean))
                    lines.append(f"| {metric} | {d.count} | {cells} |")
        return "\n".join(lines)

    def markdown(self) -> str:
        """The whole report: settings, tables, and what the columns mean."""
        weights = ", ".join(f"{m}={w:g}" for m, w in self.metrics.items())
        minimum = ", ".join(f"{m}>={v:g}" for m, v in self.minimum.items()) or "none"
        nodes = ", ".join(f"{n} {k}" for n, k in self.nodes.items()) or "none"
        return "\n".join(
            [
                f"# Masked spans of {self.dataset or 'the rows'} (seed {self.seed})",
                "",
                f"Probability {self.probability:g} per function; weights {weights}; minimum {minimum}; "
                f"max lines {self.max_lines or 'none'}; untested spans {'dropped' if self.require_tested else 'kept'}.",
                "",
                self.table(),
                "",
                f"Emitted rows per span: {nodes}.",
                "",
                "*spans*: statements and blocks inside function bodies that cover whole lines; *candidates*: those "
                "within the thresholds; *selected*: drawn, one row each; *reference fails*: the program with the "
                "span's own text put back fails the tests in the sandbox; *untested*: the tests still pass with "
                "the span replaced by `pass`, so they cannot judge a fill; *emitted*: rows in masked.jsonl.",
                "",
            ]
        )


def _number(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.1f}"
