"""Reading dataset rows from local files: JSON lines, JSON or parquet (a hub repository's files, see ``hub``)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")


class DatasetError(ValueError):
    """A dataset could not be read; the message names the file and line."""


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; a broken line raises naming the file and line."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield lineno, row


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one file, by its type (``ROW_SUFFIXES``)."""
    name = path.name
    if name.endswith((".jsonl", ".jsonl.gz")):
        return [row for _, row in iter_jsonl(path)]
    if name.endswith((".json", ".json.gz")):
        with _open_text(path) as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(data, dict):
            data = data.get("rows", data.get("data", [data]))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DatasetError(f"{path}: expected a list of JSON objects")
        return data
    if name.endswith(".parquet"):
        return _read_parquet(path)
    raise DatasetError(f"{path}: unsupported file type; use one of {', '.join(ROW_SUFFIXES)}")


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise DatasetError(f"{path}: reading parquet needs pyarrow (pip install 'codegym-evaluator[hub]')") from None
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def read_local(path: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """Rows of a local file, or of a directory (its ``{split}*`` files when a split is given, else all)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetError(f"{p}: no such file or directory")
    if p.is_file():
        return read_rows(p)
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(ROW_SUFFIXES))
    if split is not None:
        in_split = [f for f in files if f.name.startswith(split) or f.parent.name == split]
        files = in_split or files
    if not files:
        raise DatasetError(f"{p}: no data files ({', '.join(ROW_SUFFIXES)}) in this directory")
    return [row for f in files for row in read_rows(f)]
