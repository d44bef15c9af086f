"""The frames of a session between the server and the agent that holds it (``session.py``).

The server sends a ``kernel`` frame (a :class:`~.protocol.RunFrame` whose ``op`` is ``kernel``: the session's
program, files and limits) once, then a :class:`CellFrame` per cell. The agent answers each with a
:class:`KernelStarted` or a :class:`CellDone` (or an :class:`~.protocol.ErrorFrame`), which the server reads
against its type (:func:`read_kernel_started`, :func:`read_cell_done`) as it reads every answer of an agent.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from .protocol import ErrorFrame, ExitCode, RssKb, Signal, _error
from .wire_schema import Malformed, conform


class CellFrame(TypedDict):
    """One cell: its blob is a message (``kernel.message``) of ``{"source", "cell_timeout", "output_bytes",
    "stdin", "wait_credit"}`` (``sessions/cell_terms.py``), which the agent sends on to the kernel as a
    ``cell_frames.KernelRequest``."""

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
    """How a cell went: its record (``session_record.CellRecord``'s frames, read by ``cell_frames.read_record``) is
    the one blob."""

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
    why: str  # why a session that answered its cell was ended after it (empty where it lives, or ended otherwise)
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
