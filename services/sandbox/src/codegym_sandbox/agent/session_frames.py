"""The frames of a session between the server and the agent that holds it (``session.py``).

The server sends a ``kernel`` frame (a :class:`~.protocol.RunFrame` whose ``op`` is ``kernel``: the session's
program, files and limits) once, then a :class:`CellFrame` per cell. The agent answers each with a
:class:`KernelStarted` or a :class:`CellDone` (or an :class:`~.protocol.ErrorFrame`), which the server reads
against its type (:func:`read_kernel_started`, :func:`read_cell_done`) as it reads every answer of an agent.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from .cell_frames import DEAD, END
from .protocol import ErrorFrame, ExitCode, RssKb, Signal, _error
from .wire_schema import Malformed, conform

# What a cell's record may hold beyond its output: the frames' heads, the kernel's answer (a traceback, a
# value's repr, each bounded by what the supervisor passes on), why the kernel ended.
RECORD_OVERHEAD = 4 << 20


class CellFrame(TypedDict):
    """One cell: its blob is the message for the session's supervisor (``session_main.read_message``)."""

    op: Literal["cell"]
    wall_s: float  # the cell's wall-clock limit: past it (and its wait for a CPU), the agent interrupts it
    blobs: list[int]


class FilesWritten(TypedDict):
    """The answer to a ``files`` frame (a :class:`~.protocol.RunFrame`'s files, written beside the kernel)."""

    op: Literal["files"]
    written: int
    blobs: list[int]


class KernelStarted(TypedDict):
    op: Literal["kernel"]
    started: bool
    blobs: list[int]


class CellDone(TypedDict):
    """How a cell went: its record (the supervisor's frames, ``cell_frames.read_record``) is the one blob."""

    op: Literal["cell"]
    alive: bool  # the session's kernel lives on after the cell
    interrupted: bool  # the cell ran past its limit (and the time it waited for a CPU): the agent interrupted it
    timed_out: bool  # the cell passed its bound without an answer: the agent ended the session
    oom: bool  # the kernel killed a process of the session for memory during the cell
    cpu_s: float | None  # the session's processes' CPU time during the cell (the kernel's count)
    wall_s: float
    # How the session's run ended, where it did during the cell (the box's report), else None.
    exit_code: ExitCode
    signal: Signal
    max_rss_kb: RssKb
    blobs: list[int]


def read_kernel_started(header: object) -> KernelStarted | ErrorFrame:
    return _error(header) or conform(header, KernelStarted)


def read_files_written(header: object) -> FilesWritten | ErrorFrame:
    return _error(header) or conform(header, FilesWritten)


def read_cell_done(header: object, blobs: int) -> CellDone | ErrorFrame:
    if error := _error(header):
        return error
    frame = conform(header, CellDone)
    if blobs != 1:
        raise Malformed(f"a cell's answer of {blobs} blobs")
    return frame


class RecordScanner:
    """Reads a cell's record as it comes, frame by frame, to its ``end``; refuses one past ``cap``."""

    def __init__(self, output_cap: int) -> None:
        self.record = bytearray()
        self.cap = output_cap + RECORD_OVERHEAD
        self.ended = False
        self.dead = False
        self._at = 0  # where the next frame's head starts

    def take(self, data: bytes) -> bool:
        """Add ``data``; False when the record is no longer one (too large, or not frames)."""
        self.record += data
        if len(self.record) > self.cap:
            return False
        while not self.ended:
            head_end = self.record.find(b"\n", self._at, self._at + 64)
            if head_end < 0:
                return len(self.record) - self._at < 64
            try:
                kind, _, size_text = bytes(self.record[self._at : head_end]).split(b" ")
                size = int(size_text)
            except ValueError:
                return False
            if size < 0 or len(self.record) < head_end + 1 + size:
                return True
            self._at = head_end + 1 + size
            self.dead = self.dead or kind == DEAD
            self.ended = kind == END
        return self._at == len(self.record)  # nothing may follow the end of a cell's record
