"""Which running cells lend their CPU slot to a cell that waits: those seen asleep.

A session's cell holds one of the pool's own slots while it runs (``session_slots.py``), and a cell cannot give
way as a run can (killed and run again): so a cell that sleeps held its slot for nothing, and as many sleeping
cells as slots held every other session's cells back for as long as their time limits. Now, while cells wait
for a slot, a running cell seen asleep for ``ASLEEP_FOR_S`` lends its slot to the cell that has waited longest
among those that end in time (:func:`may_borrow`): it is paused (every process of its session stopped, its time
standing still: ``agent/cell_pause.py``) until that cell ends, and then continued on its slot. Cells still compute
no more at once than there are slots, and a cell that sleeps holds none that others wait for.

The slot comes back in time: a cell is lent one only where its limit, stretched by its credit for CPU waits,
fits in what the lender may still stand paused (``PAUSE_SHARE`` of its own limit, all its pauses together), and
a cell holding a lent slot lends it to nobody. So a paused cell's answer comes within its limit, its credit and
that share, which its client allows for. A cell of a longer limit than the sleepers' waits for a slot, as before.
A sleep goes on while its cell stands paused (the kernel's timers run).

A cell whose client waits less (``sessions/cell_terms.py``: NeMo-Skills') is not pausable: stood paused, it would
be answered after its client gave up. Nor may it hold a slot asleep for free (such cells asleep in every slot
held every other client's cells back for their whole limits), so seen asleep it lends its slot *awake*
(:meth:`RunningCell.lends_awake`): to any cell that waits, whatever that one's limit, and goes on running
without a slot until that cell ends, then holds it again. It is interrupted at its own time as ever, so a loan
never makes its answer late. Should it wake and compute meanwhile, it shares a CPU with the borrower: one cell
beyond the slots for each such loan at most (it lends again only once it holds its slot again, and the borrower
lends to nobody), and lending for runs still measures it. Where a pausable sleeper fits the borrower, that one
lends instead: a pause keeps the CPUs to the slots.

A cell is seen asleep where its session's processes (every thread counted: a cell computing in a thread computes)
wanted less than ``IDLE_RATE`` of a CPU on average over the last ``WINDOW_S``, and on its last look (one that has
just woken to compute is not asleep): a slot is a CPU, and holding one by waking now and then costs a cell a
quarter of a CPU of its session's CPU time for as long as it holds it.
The processes of a fork's copies are seen together (one worker), and cannot be told apart: where they leave one
of the slots their cells hold unused (they want under one CPU fewer than their slots, and a quarter), their
oldest cell lends, one a tick. A container's are seen from its agent, whose pid the server reads off
its channel (``agent_channel.peer_pid``); where they cannot be seen (a server in a container of its own), a cell
is seen asleep only while the machine's CPUs are as good as idle: then no cell holding a slot computes.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..agent.protocol import PAUSE_SHARE, WAIT_CREDIT
from .lending import LEND_IDLE_CPUS

if TYPE_CHECKING:
    import asyncio

    from .base import SessionLease
    from .worker import AgentWorker

ASLEEP_FOR_S = 0.25  # how long a running cell is seen asleep before it lends its slot to a cell that waits
LOOK_S = 0.05  # a look spans this much at least: over less, the counts' own grain decides
WINDOW_S = 0.5  # the span a running cell's demand is averaged over
IDLE_RATE = 0.25  # the CPUs a running cell wants, under which it is seen asleep


@dataclass(eq=False)
class RunningCell:
    """A cell that runs: the slot it holds (None while it stands paused), and how it was seen lately."""

    lease: SessionLease
    pausable: bool  # a cell whose client waits for its pauses (a fork's copying is never paused)
    worker: AgentWorker | None
    since: float  # when it took its slot
    limit_s: float  # its time limit: it stands paused for PAUSE_SHARE of it at most, all its pauses together
    looks: collections.deque[tuple[float, float]] = field(default_factory=collections.deque)  # (when, demand)
    asleep_from: float | None = None  # since when it has been seen asleep, on every look
    offer: asyncio.Future[AgentWorker] | None = field(default=None, repr=False)  # a slot lent, while it waits
    lender: RunningCell | None = None  # the paused cell whose slot it holds: the slot goes back to it
    paused: bool = False  # it lent its slot, and waits for it back (stopped meanwhile, unless it lends awake)
    paused_at: float = 0.0  # when its pause in progress began
    paused_s: float = 0.0  # how long its pauses before that one took
    taking: asyncio.Task[None] | None = field(default=None, repr=False)  # paused, its slot lost: its wait for one
    client: str = ""  # whose turn it waits in for a slot (its session's client: see client_turns)

    def may_lend(self) -> bool:
        """A cell may lend its slot while it holds one of its own (not lent): paused, while it has pause left;
        awake, where it may not stand paused (:meth:`lends_awake`)."""
        return self.lender is None and (self.lends_awake() or (self.pausable and self.pause_left() > 0))

    def lends_awake(self) -> bool:
        """Whether it lends its slot without being paused: a cell of a limit that is not pausable (its client
        waits no longer than that); a fork's copying (limitless) lends nothing."""
        return not self.pausable and self.limit_s > 0

    def pause_left(self) -> float:
        """How much longer it may stand paused, all its pauses together."""
        return max(PAUSE_SHARE * self.limit_s - self.paused_s, 0.0)


def may_borrow(borrower: RunningCell, lender: RunningCell) -> bool:
    """Whether ``borrower``'s cell ends, at its limit stretched by its credit for CPU waits, within what ``lender``
    may stand paused: the lent slot comes back in time. A lender awake waits for nothing: any cell borrows."""
    return lender.lends_awake() or fits(borrower, lender.pause_left())


def fits(borrower: RunningCell, pause_s: float) -> bool:
    """Whether ``borrower``'s cell ends, at its limit and its credit for CPU waits, within ``pause_s``."""
    return borrower.limit_s * (1 + WAIT_CREDIT) <= pause_s


def asleep(cell: RunningCell, now: float, machine_idle: bool, share: int, demand_s: Callable[[], float | None]) -> bool:
    """Whether ``cell`` is seen asleep now (see the module's text): its processes (read by ``demand_s``, once a
    look is due) wanted under ``IDLE_RATE`` of a CPU on average over the last ``WINDOW_S`` (``ASLEEP_FOR_S`` at
    least) and on its last look. The average is what holding a slot costs: a cell that wakes for a moment now and
    then does not reset it, and one that has just woken to compute is not asleep. ``machine_idle``: the machine's
    CPUs were as good as idle since the last tick (where its processes cannot be seen); ``share``: the cells
    holding slots whose processes are measured with this one's (a fork's copies): they are seen asleep where
    they leave one of their slots unused (under ``share - 1 + IDLE_RATE`` CPUs), and then their oldest lends."""
    if cell.looks and now - cell.looks[-1][0] < LOOK_S:
        return False  # looked at a moment ago: over less, the counts' own grain decides (and each look reads /proc)
    demand = demand_s()
    if demand is not None:
        looks = cell.looks
        looks.append((now, demand))
        while len(looks) > 2 and looks[1][0] <= now - WINDOW_S:
            looks.popleft()
        if len(looks) < 2:
            return False
        (t0, d0), (t1, d1), (t2, d2) = looks[0], looks[-2], looks[-1]
        most = share - 1 + IDLE_RATE
        return t2 - t0 >= ASLEEP_FOR_S and (d2 - d0) / (t2 - t0) < most and (d2 - d1) / max(t2 - t1, 1e-9) < most
    cell.looks.append((now, 0.0))
    if not machine_idle:
        cell.asleep_from = None
        return False
    if cell.asleep_from is None:
        cell.asleep_from = now
    return now - cell.asleep_from >= ASLEEP_FOR_S


def machine_idle(cpus: int, idle_cpus: float) -> bool:
    """Whether the CPUs were as good as idle (for cells whose processes cannot be seen)."""
    return idle_cpus >= cpus - LEND_IDLE_CPUS
