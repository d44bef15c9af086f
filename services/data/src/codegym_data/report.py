"""What a transformation run did to a dataset, per transformation: counted, as a table and as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TransformStats:
    """One transformation over one dataset.

    Every row is counted once: ``no_solution`` + ``not_applicable`` + ``errors`` + ``applied`` = ``rows``, and
    of the applied ones ``original_failed`` + ``sandbox_errors`` + ``passed`` + ``dropped`` = ``applied``.
    """

    transformation: str
    rows: int = 0
    no_solution: int = 0  # no Python reference solution to transform
    not_applicable: int = 0  # nothing in the program the transformation rewrites
    errors: int = 0  # the transformation failed on the row (a bug in it; see dropped.jsonl)
    applied: int = 0  # the program was rewritten
    original_failed: int = 0  # rewritten, but the original solution fails its own tests: not the rewrite's fault
    sandbox_errors: int = 0  # the sandbox could not judge the rewritten program
    passed: int = 0  # the rewritten program passes the tests: kept
    dropped: int = 0  # the original passes and the rewritten program does not: dropped

    @property
    def judged(self) -> int:
        """Rewritten rows whose original passes and whose rewrite the sandbox judged."""
        return self.passed + self.dropped

    @property
    def pass_share(self) -> float | None:
        """The share of judged rewrites that still pass; None when none was judged."""
        return self.passed / self.judged if self.judged else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "judged": self.judged, "pass_share": self.pass_share}


@dataclass
class TransformReport:
    """The report of one run: the dataset, the seed, the originals' verdicts and each transformation's counts."""

    dataset: str
    seed: int
    rows: int
    originals_judged: int = 0
    originals_failed: list[str] = field(default_factory=list)  # task ids whose own solution fails its tests
    stats: list[TransformStats] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "seed": self.seed,
            "rows": self.rows,
            "originals_judged": self.originals_judged,
            "originals_failed": self.originals_failed,
            "transformations": [s.to_dict() for s in self.stats],
        }

    def table(self) -> str:
        """The counts as a markdown table, one row per transformation."""
        lines = [
            "| transformation | rows | no solution | not applicable | applied | original fails | passed | dropped "
            "| still passing |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in self.stats:
            share = f"{s.pass_share:.1%} ({s.passed}/{s.judged})" if s.pass_share is not None else "-"
            lines.append(
                f"| {s.transformation} | {s.rows} | {s.no_solution} | {s.not_applicable} | {s.applied} | "
                f"{s.original_failed} | {s.passed} | {s.dropped} | {share} |"
            )
        return "\n".join(lines)

    def markdown(self) -> str:
        """The whole report: the table and what its columns mean."""
        failed = ", ".join(self.originals_failed[:20]) + (" ..." if len(self.originals_failed) > 20 else "")
        notes = [
            f"- {s.transformation}: {s.errors} errors of the transformation, {s.sandbox_errors} sandbox errors "
            "(see dropped.jsonl)"
            for s in self.stats
            if s.errors or s.sandbox_errors
        ]
        return "\n".join(
            [
                f"# Transformations of {self.dataset} (seed {self.seed})",
                "",
                f"{self.rows} rows; {self.originals_judged} reference solutions judged, "
                f"{len(self.originals_failed)} of them fail their own tests{': ' + failed if failed else ''}.",
                "",
                self.table(),
                "",
                "*no solution*: the row has no Python reference solution; *not applicable*: nothing in the program "
                "is what the transformation rewrites; "
                "*applied*: the transformation rewrote the program; *original fails*: rewritten, but the row's own "
                "solution fails its tests, so the rewrite is not judged (and not kept); *passed*: the rewritten "
                "program passes the row's tests in the sandbox and is kept; *dropped*: it does not (while the "
                "original does); *still passing*: passed / (passed + dropped).",
                *(["", *notes] if notes else []),
                "",
            ]
        )
