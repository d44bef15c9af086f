"""What a session's kernel writes on its stdout and stderr pipes during a cell, taken into the cell's record."""

from __future__ import annotations

import fcntl
import os
import selectors

from .cell_frames import ERR, OUT
from .session_record import CellRecord


def read(fd: int) -> bytes | None:
    """What the pipe holds now: None where it holds nothing yet, empty where every writer closed it."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def take(record: CellRecord, fd: int, kind: bytes, sel: selectors.BaseSelector) -> None:
    data = read(fd)
    if data:
        record.output(kind, data)
    elif data is not None:
        sel.unregister(fd)  # every writer closed it: the kernel and what it started


def drain(record: CellRecord, stdout: int, stderr: int) -> None:
    """What the kernel wrote before it answered (or ended) is in the pipes by now: record it, up to what a pipe
    holds (children writing on meanwhile never keep the agent here)."""
    for fd, kind in ((stdout, OUT), (stderr, ERR)):
        try:
            left = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        except OSError:
            continue  # closed
        while left > 0 and (data := read(fd)):
            record.output(kind, data)
            left -= len(data)
