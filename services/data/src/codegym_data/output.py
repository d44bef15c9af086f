"""The files a run of ``transform``, ``mask`` or ``synthesize`` writes into its ``--out`` directory: its rows,
``report.md``, ``report.json``, and a jsonl of what it did not keep."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol


class Report(Protocol):
    """A run's report: a Markdown page and the same numbers as JSON."""

    def markdown(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def output_paths(directory: str | Path, rows: str, left_out: str) -> dict[str, Path]:
    """The run's files in ``directory`` (made if missing) by name: ``rows``, ``report.md``, ``report.json`` and
    ``left_out``, in that order."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return {name: out / name for name in (rows, "report.md", "report.json", left_out)}


def write_report(report: Report, paths: Mapping[str, Path]) -> None:
    """``report`` into ``paths["report.md"]`` and ``paths["report.json"]``."""
    paths["report.md"].write_text(report.markdown(), encoding="utf-8")
    paths["report.json"].write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object a line."""
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")
