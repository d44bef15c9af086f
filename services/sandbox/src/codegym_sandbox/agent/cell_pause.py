"""A running cell paused by the server, and continued: the CPU slot it held was lent to a cell that waited.

A running cell holds one of the pool's CPU slots. One that sleeps would hold it for nothing while other sessions'
cells wait, for as long as its time limit; and it cannot be killed and run again. So
when cells wait and a running cell is seen asleep, the server pauses it (a ``pause`` frame, sent while the cell
runs), lends its slot to a waiting cell, and continues it (``resume``) once that cell has ended. (A run is paused
the same way, for other reasons: ``run_pause.py``; it is no longer killed and run again.) Paused, every
process of the session is stopped (``session_pause``, as between cells), so that it computes only while it holds
a slot; the time it stood paused does not count against the cell: its limit moves on by it, as by a wait for a
CPU (its wall time, in its answer, is the time it took).

The frames come on the server's channel while the agent watches the cell. Any other frame that comes then (a
member's ``end``, sent as its cell runs) is kept for the agent's loop to read after the cell (``later``).
"""

from __future__ import annotations

import select
import time
from typing import Protocol

from .protocol import ProtocolError, read_frame

PAUSE, RESUME = "pause", "resume"
_FRAMES_S = 0.05  # what a pause and its resume may take on their way from the server, beyond the pause it held
OPS = (PAUSE, RESUME)  # the frames that have no answer: a pause (or resume) that came after its cell is dropped


class Stoppable(Protocol):
    """What a pause stops: every process of a session (``kernel_place.KernelPlace``), or of a run's box."""

    def stop(self) -> bool: ...

    def resume(self) -> None: ...


class CellPause:
    """The pauses of one cell: whether it stands paused now, and for how long it stood so in all."""

    def __init__(self, place: Stoppable) -> None:
        self.place = place
        self.since: float | None = None  # when the pause in progress began
        self.total_s = 0.0
        self.stopped = True  # whether the last pause stopped every process of the session
        self.outlasted = False  # whether a frame (its resume) came before the last pause's walk ended

    @property
    def paused(self) -> bool:
        return self.since is not None

    def take(self, fd: int) -> tuple[dict[str, object], list[bytearray]] | None:
        """Read the server's next frame from ``fd`` and act on a pause or a resume: the seconds a resume ended a
        pause of (added to :attr:`total_s`) are for the caller to move its deadlines by. Another frame comes back
        for later (the caller stops watching ``fd``)."""
        try:
            header, blobs = read_frame(fd)
        except (ProtocolError, OSError):
            return {"op": "end"}, []  # the server hung up: read as its end, after the cell
        op = header.get("op")
        if op == PAUSE and self.since is None:
            self.since = time.monotonic()
            self.stopped = self.place.stop()
            self.outlasted = bool(select.select([fd], [], [], 0)[0])  # a frame came as it stopped them: see below
        elif op == RESUME and self.since is not None:
            self.place.resume()
            credit = self.credit()
            held = header.get("held_s")
            if self.outlasted and isinstance(held, int | float) and not isinstance(held, bool):
                # The walk that stopped the processes outlasted a pause the server ended meanwhile (one slow to take
                # its stop, in a long call): no more than the server held it, and its frames' way.
                credit = min(credit, max(float(held), 0.0) + _FRAMES_S)
            self.total_s += credit
            self.since = None
        elif op not in OPS:
            return header, blobs
        return None

    def credit(self) -> float:
        """What the pause in progress counts for, ended now: the time since it came. The walk that stops its
        processes (a second where one is slow to take its stop, on a loaded machine) is time the run stood still:
        one not yet seen stopped has its stop pending, and runs no instruction of its own before it takes it."""
        return time.monotonic() - self.since if self.since is not None else 0.0

    def shifted(self, before: float) -> float:
        """How far a deadline moves for the pauses ended since :attr:`total_s` was ``before``."""
        return self.total_s - before
