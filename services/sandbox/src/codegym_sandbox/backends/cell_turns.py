"""Which running cells give their CPU slot to a cell that waits: those seen asleep.

A session's cell holds one of the pool's own slots while it runs (``session_slots.py``), and a cell cannot give
way as a run can (killed and run again): so a cell that sleeps held its slot for nothing, and as many sleeping
cells as slots held every other session's cells back for as long as their time limits. Now, while cells wait
for a slot and none is free, a running cell seen asleep for ``ASLEEP_FOR_S`` is paused (every process of its
session stopped, its time standing still: ``agent/cell_pause.py``), its slot goes to the cell that waited
longest, and it waits in the same line to be continued: cells still compute no more at once than there are
slots, and a cell that sleeps holds none. A sleep goes on while its cell stands paused (the kernel's timers run),
so a cell paused in a long sleep finds it over when it is continued.

A cell is seen asleep where its session's processes wanted less than ``IDLE_RATE`` of a CPU over each look since
it was first seen so: a slot is a CPU, and one that keeps its cell waking for a moment now and then (to hold it)
costs that cell a quarter of a CPU of its session's CPU time for as long as it holds it. Where they cannot be
seen (a container's), it is seen asleep only while the machine's CPUs are as good as idle: then no cell holding
a slot computes. The processes of a fork's copies are seen together (one worker): a copy is seen asleep where
all of them are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .lending import LEND_IDLE_CPUS

if TYPE_CHECKING:
    import asyncio

    from .worker import AgentWorker

ASLEEP_FOR_S = 0.25  # how long a running cell is seen asleep before it gives its slot to a cell that waits
LOOK_S = 0.05  # a look spans this much at least: over less, the counts' own grain decides
IDLE_RATE = 0.25  # the CPUs a running cell wants, under which it is seen asleep


class Pausable(Protocol):
    """A session's lease as the pool sees its running cell."""

    def demand_s(self) -> float | None: ...

    def pause(self, paused: bool) -> None: ...


@dataclass(eq=False)
class RunningCell:
    """A cell that runs: the slot it holds (None while it stands paused), and how it was seen lately."""

    lease: Pausable
    pausable: bool  # a cell (a fork's copying is never paused)
    worker: AgentWorker | None
    since: float  # when it took its slot
    look: tuple[float, float] | None = None  # when it was last looked at, and its demand then
    asleep_from: float | None = None  # since when it has been seen asleep, on every look
    regain: asyncio.Task[None] | None = field(default=None, repr=False)  # its wait for a slot, while paused
    pauses: int = 0


def asleep(cell: RunningCell, now: float, machine_idle: bool) -> bool:
    """Whether ``cell`` has been seen asleep for ``ASLEEP_FOR_S`` (looked at now: see the module's text).
    ``machine_idle``: the machine's CPUs were as good as idle since the last tick."""
    demand = cell.lease.demand_s()
    if demand is None:
        sleeping = machine_idle
    else:
        if cell.look is None or now - cell.look[0] < LOOK_S:
            cell.look = cell.look or (now, demand)
            return False
        sleeping = (demand - cell.look[1]) / (now - cell.look[0]) < IDLE_RATE
        cell.look = (now, demand)
    if not sleeping:
        cell.asleep_from = None
        return False
    if cell.asleep_from is None:
        cell.asleep_from = now
    return now - cell.asleep_from >= ASLEEP_FOR_S


def machine_idle(cpus: int, idle_cpus: float) -> bool:
    """Whether the CPUs were as good as idle (for cells whose processes cannot be seen)."""
    return idle_cpus >= cpus - LEND_IDLE_CPUS
