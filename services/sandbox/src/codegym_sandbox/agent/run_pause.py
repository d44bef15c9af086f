"""A running program paused by the server, and continued: it stands still, it is never run again.

The server pauses a run (a ``pause`` frame on its channel, as for a session's cell: ``cell_pause.py``) where
letting it go on would cost its neighbours or the machine: what the runs in flight hold has passed the memory
budget (``backends/memory.py``), or it was lent a worker as a sleeper and now computes beside more runs than the
CPUs hold (``backends/lending.py``). Killing it and running it again would do the same for the machine, but a
program that chose, on a draw of its own (``os.urandom``), whether to grow or compute would then have a bad draw
drawn again: a reward it did not earn. Paused, it keeps the one run it has; every process under the box, and the
box, is stopped (``session_pause.stop``), and the time it stood paused moves its deadline on and is no part of its
wall time (``CellPause.credit``). The kernel's timers run on while it stands stopped, so what a pause is credited, a
program whose time is a wait gains: the server keeps pauses for memory short (``backends/memory.py``).

An exchange of many tests is paused in whichever of its runs is on; a pause that comes as a run ends holds for
the exchange's next run (``_carried``), and one that comes after the exchange's last run is read by the agent's
loop and dropped, as is a resume for no run.
"""

from __future__ import annotations

import selectors
import time

from . import session_pause
from .cell_pause import CellPause

_server = -1  # the server's channel, watched as a run runs
_carried = False  # a pause that came as the exchange's last run ended: its next run starts paused
_later: tuple[dict[str, object], list[bytearray]] | None = None  # a frame that came as a run ran (not a pause)


class _Box:
    """The box of a run, and every process under it: what a pause stops."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def stop(self) -> bool:
        return session_pause.stop(self.pid)

    def resume(self) -> None:
        session_pause.resume(self.pid)


class RunPause(CellPause):
    """The pauses of one run of the box ``box_pid``, read from the server's channel (:func:`watch`)."""

    def __init__(self, box_pid: int) -> None:
        super().__init__(_Box(box_pid))
        self.server = _server
        global _carried
        if _carried:  # the run was sent: it stands still from its start
            _carried = False
            self.since = time.monotonic()
            self.stopped = self.place.stop()

    def read(self, sel: selectors.BaseSelector) -> float:
        """Read the server's next frame and act on it: the seconds a pause it ended lasted (0.0 for none). Any
        other frame is kept for the agent's loop (:func:`take_later`), and the channel is watched no more."""
        global _later
        before = self.total_s
        other = self.take(self.server)
        if other is not None:
            _later = other
            sel.unregister(self.server)
        return self.total_s - before

    def end(self) -> None:
        """The run ended: a pause it stands in holds for the exchange's next run, its box continued meanwhile."""
        global _carried
        if self.paused:
            self.place.resume()
            self.total_s += self.credit()
            self.since, _carried = None, True


def watch(server: int) -> None:
    global _server
    _server = server


def take_later() -> tuple[dict[str, object], list[bytearray]] | None:
    """A frame of the server's that came as a run ran (read then, to be served now)."""
    global _later
    later, _later = _later, None
    return later


def forget() -> None:
    """The exchange is over: a pause carried past its last run is for no run."""
    global _carried
    _carried = False
