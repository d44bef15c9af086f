"""When a session's cell runs out of time: its limit, moved on by the time its kernel waited for a CPU.

A run's deadline moves on by the time its processes waited for CPUs that other runs held (``loop._stretched``);
a session's cell gets the same credit, so that a busy machine never turns a cell into a time-out. The kernel
lives across cells, so what counts is its wait since the cell began (:func:`run_cpu.waited_since`). The kernel
adds a wait to its count only when the wait ends: a kernel that is waiting at the limit is looked at again a
moment later, and the time it stood runnable without running meanwhile is credited too. The credit is at most
``WAIT_CREDIT`` times the limit, as a run's. A cell whose caller waits for its limit and no longer (``credit``
false: ``sessions/cell_terms.py``) has none: it is interrupted at its limit, so that its answer comes in time.
"""

from __future__ import annotations

import time

from . import run_cpu
from .protocol import WAIT_CREDIT
from .run_cgroup import RunCgroup

PROBE_S = 0.05  # how soon a kernel found waiting at its limit is looked at again


class CellClock:
    def __init__(self, kernel: int, meter: RunCgroup | None, box: int, wall_s: float, credit: bool = True) -> None:
        self.kernel, self.meter, self.box, self.wall_s, self.credit = kernel, meter, box, wall_s, credit
        self.started = time.monotonic()
        self.clock = run_cpu.machine_clock()
        self.used_zero = run_cpu.runs_used_s(meter, box)
        self.zero = run_cpu.task_times(kernel) if kernel else None
        self.interrupt_at = self.started + wall_s
        # While the kernel is seen waiting: when it was last looked at, its CPU time and the session's then, and
        # its counted wait when the looking began; and how long it has stood runnable without running since.
        self.probe: tuple[float, float, float, float] | None = None
        self.stalled = 0.0
        self.paused_s = 0.0  # the time it stood paused (``cell_pause.py``): not the cell's

    def moved(self, paused_s: float) -> float:
        """Move the limit on by a pause of ``paused_s`` just ended; the seconds it moved."""
        self.paused_s += paused_s
        self.interrupt_at += paused_s
        self.probe = None  # the pause is no wait for a CPU
        return paused_s

    def due(self, now: float) -> bool:
        """At ``interrupt_at``: whether the cell must be interrupted now (else ``interrupt_at`` moved on)."""
        if self.zero is None or not self.credit:
            return True
        used = run_cpu.runs_used_s(self.meter, self.box)
        spent = None if used is None or self.used_zero is None else used - self.used_zero
        waited = run_cpu.waited_since(self.kernel, self.zero, self.clock, spent)
        look = run_cpu.task_state(self.kernel)
        credit, grew = waited, False
        if look is not None and look[0] == "R":
            ran, session = look[1], spent if spent is not None else look[1]
            if self.probe is None:
                self.probe, self.stalled, grew = (now, ran, session, waited), 0.0, True
            else:
                then, then_ran, then_session, base = self.probe
                if now - then >= PROBE_S:
                    # What the session's other processes ran meanwhile may be why it waited: that buys nothing.
                    others = max(session - then_session - (ran - then_ran), 0.0)
                    stood = max((now - then) - (ran - then_ran) - others, 0.0)
                    self.stalled += stood
                    grew = stood > (now - then) / 2  # it stood more than it ran: still waiting for a CPU
                    self.probe = (now, ran, session, base)
                else:
                    # Too soon to tell (the loop woke for output, or at a limit the credit moved): over a few
                    # milliseconds the counts' own grain decides, so the look waits for its whole interval.
                    grew = True
                credit = max(waited, base + self.stalled)
        else:
            self.probe = None
        cap = WAIT_CREDIT * self.wall_s
        self.interrupt_at = self.started + self.paused_s + self.wall_s + min(credit, cap)
        if now < self.interrupt_at:
            return False
        if grew and credit < cap:
            assert self.probe is not None
            self.interrupt_at = self.probe[0] + PROBE_S  # it is waiting for a CPU now: look again
            return False
        return True
