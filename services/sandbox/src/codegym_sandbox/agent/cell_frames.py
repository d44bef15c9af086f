"""The record of a notebook run (``cells.py``): the frames its supervisor writes, and how the server reads them.

The supervisor's stdout is a sequence of frames, ``b"<kind> <cell> <length>\\n"`` and ``length`` bytes: what
the kernel wrote on its stdout (``out``) and stderr (``err``) while a cell ran, the kernel's answer for a
cell (``cell``: its display and error, as JSON), that output past the job's cap was dropped (``cut``), that
the kernel ended before it answered (``dead``: why), and that every cell was answered (``end``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

OUT, ERR, CELL, CUT, DEAD, END = b"out", b"err", b"cell", b"cut", b"dead", b"end"


def representable(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8, and so no JSON answer, can carry) written as its
    escape, ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class CellRecord:
    """What one cell did, as the supervisor recorded it."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    display: list[dict[str, str]] = field(default_factory=list)
    error: list[dict[str, Any]] = field(default_factory=list)
    answered: bool = False


@dataclass
class Record:
    """A run of :data:`CELLS_MAIN`, read back from its stdout."""

    cells: list[CellRecord] = field(default_factory=list)
    finished: bool = False  # every cell was sent and answered
    ended: str | None = None  # why the kernel stopped before that
    cut: bool = False  # output past the job's cap was dropped
    stdout: bytearray = field(default_factory=bytearray)  # every cell's, and what came after the last
    stderr: bytearray = field(default_factory=bytearray)


def read_record(data: bytes, cells: int) -> Record:
    """The supervisor's frames (``data``: the run's stdout, perhaps cut short) for a job of ``cells`` cells."""
    record = Record(cells=[CellRecord() for _ in range(cells)])
    view = memoryview(data)
    while view:
        end = bytes(view[:64]).find(b"\n")
        try:
            kind, cell_text, size_text = bytes(view[:end]).split(b" ") if end > 0 else (b"", b"", b"")
            cell, size = int(cell_text), int(size_text)
        except ValueError:
            break
        body = bytes(view[end + 1 : end + 1 + size])
        if len(body) < size or not 0 <= cell <= cells:
            break
        view = view[end + 1 + size :]
        one = record.cells[cell] if cell < cells else None
        if kind in (OUT, ERR):
            (record.stdout if kind == OUT else record.stderr).extend(body)
            if one is not None:
                (one.stdout if kind == OUT else one.stderr).extend(body)
        elif kind == CELL and one is not None:
            try:
                answer = json.loads(body)
                one.display, one.error, one.answered = answer["display"], answer["error"], True
            except (ValueError, KeyError, TypeError):
                break
        elif kind == CUT:
            record.cut = True
        elif kind == DEAD:
            record.ended = representable(body.decode("utf-8", "replace"))
        elif kind == END and cell == cells:
            record.finished = all(c.answered for c in record.cells)
    return record
