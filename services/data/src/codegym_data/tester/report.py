"""What ``Tester.run`` answers: each test's verdict and covered lines, and the union over the tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codegym_sandbox.verdicts import Verdict


@dataclass(frozen=True)
class LineCoverage:
    """Which executable lines of the program under test ran (line numbers of the program as given, from 1)."""

    executable: frozenset[int]
    covered: frozenset[int]

    @property
    def percent(self) -> float:
        """Covered lines as a percentage of the executable ones (100 for a program with none)."""
        return 100.0 * len(self.covered) / len(self.executable) if self.executable else 100.0

    @property
    def uncovered(self) -> list[int]:
        return sorted(self.executable - self.covered)

    def to_dict(self) -> dict[str, Any]:
        return {
            "covered": len(self.covered),
            "executable": len(self.executable),
            "percent": round(self.percent, 2),
            "covered_lines": sorted(self.covered),
            "uncovered_lines": self.uncovered,
        }

    @staticmethod
    def from_counts(counts: dict[int, int]) -> LineCoverage:
        """From a tool's execution count per executable line (gcov, V8): covered where the count is above 0."""
        return LineCoverage(frozenset(counts), frozenset(n for n, c in counts.items() if c > 0))

    @staticmethod
    def union(parts: Iterable[LineCoverage]) -> LineCoverage | None:
        """The lines that any part covered, of the lines that any part could run; None without parts."""
        parts = list(parts)
        if not parts:
            return None
        executable = frozenset().union(*(p.executable for p in parts))
        return LineCoverage(executable, frozenset().union(*(p.covered for p in parts)))


@dataclass
class TestResult:
    """One test: the sandbox judge's verdict, and the lines of the program its instrumented run covered."""

    __test__ = False  # a result, not a pytest class

    index: int
    kind: str  # stdio, call or assert
    verdict: Verdict
    wall_s: float
    stdout: str  # the start of the judged run's output
    stderr: str  # the end of its stderr
    coverage: LineCoverage | None = None
    coverage_error: str | None = None  # why ``coverage`` is None, when the language has coverage

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "verdict": self.verdict,
            "wall_s": round(self.wall_s, 4),
            "stdout": self.stdout,
            "stderr": self.stderr,
            "coverage": self.coverage.to_dict() if self.coverage else None,
            "coverage_error": self.coverage_error,
        }


@dataclass
class TestReport:
    """A program's verdicts on its tests and its line coverage, per test and in total."""

    __test__ = False

    language: str
    verdict: Verdict  # AC when every test passed, else the first failing test's verdict (the sandbox's)
    tests: list[TestResult]
    coverage: LineCoverage | None  # the union over the tests; None when not measured (see ``coverage_note``)
    coverage_note: str | None = None  # how coverage was measured, or why it was not
    compile_error: str | None = None
    verdicts: dict[Verdict, int] = field(init=False)

    def __post_init__(self) -> None:
        self.verdicts = dict(Counter(t.verdict for t in self.tests))

    @property
    def passed(self) -> int:
        return sum(t.verdict is Verdict.AC for t in self.tests)

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "verdict": self.verdict,
            "passed": self.passed,
            "total": len(self.tests),
            "verdicts": self.verdicts,
            "coverage": self.coverage.to_dict() if self.coverage else None,
            "coverage_note": self.coverage_note,
            "compile_error": self.compile_error,
            "tests": [t.to_dict() for t in self.tests],
        }

    def table(self) -> str:
        """A per-test table and the total, for a terminal."""
        rows = [("test", "kind", "verdict", "time", "lines", "covered lines")]
        for t in self.tests:
            cov = t.coverage
            lines = f"{len(cov.covered)}/{len(cov.executable)}" if cov else "-"
            shown = _ranges(sorted(cov.covered)) if cov else (t.coverage_error or "-")
            rows.append((str(t.index), t.kind, t.verdict, f"{t.wall_s:.3f}s", lines, shown))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[5] for r in rows]
        summary = ", ".join(f"{v} {n}" for v, n in sorted(self.verdicts.items()))
        out.append(f"\n{self.language}: {self.verdict}, {self.passed}/{len(self.tests)} passed ({summary})")
        if self.compile_error:
            out.append(f"compile error:\n{self.compile_error}")
        if self.coverage is not None:
            c = self.coverage
            out.append(
                f"coverage: {len(c.covered)}/{len(c.executable)} lines ({c.percent:.1f}%), "
                f"uncovered: {_ranges(c.uncovered) or 'none'}"
            )
        if self.coverage_note:
            out.append(f"coverage: {self.coverage_note}" if self.coverage is None else f"({self.coverage_note})")
        return "\n".join(out)


def _ranges(lines: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1-3,7``."""
    parts: list[str] = []
    start = prev = None
    for n in [*lines, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ",".join(parts)
