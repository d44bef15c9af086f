"""What of ``pool.WorkerPool`` serves sessions: each session's worker of its own, numbered past the pool's slots
(``session_lease.py``), and one of the pool's own slots held while a session's cell computes. Mixed into
``pool.WorkerPool``, as ``lent.LentSlots`` is.

A cell takes only the pool's own workers and waits apart from runs (``_cell_waiters``), so lending, which
lends for runs alone, never counts a cell as a run that can stand paused: a lent worker bets that its run may
sleep, and a run that computes after all stands paused for the CPUs (``lending.py``). A cell seen asleep while
cells wait lends its slot to the one that waited longest instead, paused until that one ends, or running on
without a slot where it may not be paused (``cell_turns.py``). Cells wait for a slot in their session's
client's turn, as runs do (``client_turns.py``): a slot lent from cell to cell is the borrower's client's while
it holds it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from . import cell_turns
from .base import Saturated, SessionLease
from .cell_turns import RunningCell
from .client_turns import FreeWorkers
from .lending import DemandMeter
from .memory import Lease, MemoryBudget
from .session_family import fork_lease
from .session_lease import next_slot, open_lease

if TYPE_CHECKING:
    from .base import RunRequest
    from .worker import AgentWorker


class SessionSlots:
    """Sessions' workers and cells' slots; the pool's queue and lending are ``WorkerPool``'s."""

    size: int
    max_workers: int
    cpus: int
    memory: MemoryBudget
    worker_cost_mb: int
    _idle: FreeWorkers[AgentWorker]
    _waiters: dict[int, float]
    _parked: dict[int, float]
    _meter: DemandMeter
    _idle_ticks: int

    def __init__(self) -> None:
        self._cell_waiters: dict[int, float] = {}  # id -> when a cell began to wait for a slot, oldest first
        self._cells: dict[AgentWorker, SessionLease] = {}  # a slot held by a session's cell -> what runs the cell
        self._running: dict[AgentWorker, RunningCell] = {}  # the same slots -> the cells (see cell_turns.py)
        self.cells_paused = 0  # running cells paused to give their slot to a cell that waited
        self.cells_lent_awake = 0  # running cells not pausable that gave their slot to a cell that waited, running on
        self._awake: set[RunningCell] = set()  # those running on now without their slot (lending measures them)
        self._borrowers: dict[RunningCell, None] = {}  # cells waiting for a slot, the longest waiting first
        self.session_slots: set[int] = set()  # the workers of sessions, past max_workers
        self.session_slot_count = 64  # set by the server: SESSIONS__MAX_SESSIONS
        self._last_session_slot: int | None = None

    def make_worker(self, slot: int) -> AgentWorker:
        raise NotImplementedError

    async def _take(self, deadline: float | None, wait_s: float | None, client: str, cell: bool = False) -> AgentWorker:
        raise NotImplementedError

    def _replace(self, worker: AgentWorker) -> None:
        raise NotImplementedError

    def _release(self, worker: AgentWorker) -> None:
        raise NotImplementedError

    async def open_session(self, request: RunRequest, memory_mb: int) -> SessionLease:
        """A worker of its own holding ``request``'s kernel (see ``session_lease``), numbered past the pool's
        slots: its programs' host user is the slot's. Its lease holds ``memory_mb`` and the worker's cost (a
        container's: ``worker_cost.py``)."""
        slot = next_slot(self.session_slots, self.max_workers, self.session_slot_count, self._last_session_slot)
        if slot is None:
            raise Saturated(retry_after_s=5)
        self._last_session_slot = slot
        cost = memory_mb + self.worker_cost_mb
        return await open_lease(self.memory, self.make_worker, self.session_slots, slot, request, cost)

    @property
    def fork_refusal(self) -> str | None:
        """Why this backend forks no session (None: it does): each backend that forks says so itself (local,
        podman and docker: a copy is a host user of its own, which takes what each of them sets up)."""
        return "this backend forks no session: forks are the local, podman and docker backends' (as root, x86_64)"

    async def fork_session(
        self, lease: SessionLease, n: int, reseed: bool, memory_mb: int, cpu_s: float
    ) -> list[SessionLease]:
        """Fork ``lease``'s session into ``n`` copies (``session_family.py``): the session's next lease, then the
        copies'. Each copy takes a sessions' slot (its host user) and ``memory_mb`` of the budget, and the session
        as much again (what it held stays held, shared with its copies); :class:`Saturated` where there is no
        room, and :class:`~.session_family.ForkRefused` where the agent refuses."""
        memories: list[Lease] = []
        slots: list[int] = []
        try:
            for _ in range(n + 1):
                memories.append(await self.memory.acquire(memory_mb, 0.0))
            for _ in range(n):
                slot = next_slot(self.session_slots, self.max_workers, self.session_slot_count, self._last_session_slot)
                if slot is None:
                    raise Saturated(retry_after_s=5)
                self._last_session_slot = slot
                self.session_slots.add(slot)
                slots.append(slot)
            copies = list(zip(slots, memories[1:], strict=True))
            made = await fork_lease(
                lease, copies, memories[0], self.memory, self.session_slots, self.max_workers, reseed, memory_mb, cpu_s
            )
        except BaseException:
            for memory in memories:
                self.memory.release(memory)
            self.session_slots.difference_update(slots)
            raise
        return list(made)

    @contextlib.asynccontextmanager
    async def computing(
        self, cell: SessionLease, pausable: bool = True, limit_s: float = 0.0, client: str = ""
    ) -> AsyncIterator[None]:
        """One of the pool's own slots, held while a session's cell runs on ``cell`` (the session's worker): cells
        and runs compute from one queue, in their clients' turns (``client``: the session's). Lent slots are for
        what can stand paused when it computes (a run); lending measures ``cell`` in its slot's place, so a
        cell that sleeps leaves the CPUs to runs. While it waits, a cell may be lent the slot of a cell seen
        asleep; one ``pausable`` (a cell of limit ``limit_s`` whose client waits for its pauses, not a fork's
        copying) may lend its own (see ``cell_turns.py``)."""
        running = RunningCell(cell, pausable and limit_s > 0, None, time.monotonic(), limit_s)
        running.client = client or f"#{id(running)}"  # a cell from no one named: a client of its own
        self._hold(running, await self._slot_for(running))
        try:
            yield
        finally:
            running.paused = False  # it ended (its answer came as it was paused): it wants its slot no more
            if running.taking is not None:
                running.taking.cancel()
            if running.worker is not None:
                self._unhold(running)
            elif running in self._awake:  # it ended as its slot was lent: the borrower keeps it
                self._awake.discard(running)
                self._meter.ended(running.lease)

    async def _slot_for(self, running: RunningCell) -> AgentWorker:
        """A slot for a cell: the next of the queue's, or one lent to it meanwhile (``_turn_cells``)."""
        if not self._idle.empty() and not self._cell_waiters:  # one is free: taken at once (a trivial cell's way)
            return await self._take(None, None, running.client, cell=True)
        take = asyncio.ensure_future(self._take(None, None, running.client, cell=True))
        offer = running.offer = asyncio.get_running_loop().create_future()
        if running.limit_s > 0:  # a fork's copying, limitless (and its wait for room), borrows nothing
            self._borrowers[running] = None
        kept: asyncio.Future[AgentWorker] | None = None
        try:
            await asyncio.wait({take, offer}, return_when=asyncio.FIRST_COMPLETED)
            kept = offer if offer.done() else take
        finally:
            self._borrowers.pop(running, None)
            running.offer = None
            if not offer.done():
                offer.cancel()
            elif kept is not offer and not offer.cancelled():
                self._repay(running, offer.result())  # lent as it went away (or as a slot came): back to its lender
            if not take.done():
                take.cancel()  # a take is cancelled safely: the queue keeps what it did not hand out
            elif kept is not take and not take.cancelled() and take.exception() is None:
                self._give_back(take.result())  # both came: one slot is enough
        return kept.result()

    def cell_leases(self) -> list[SessionLease]:
        """What runs the cells that may compute now: those holding slots, and those running on without theirs
        (lent awake): lending for runs measures them in the slots' place."""
        return [*self._cells.values(), *(r.lease for r in self._awake)]

    def _hold(self, running: RunningCell, worker: AgentWorker) -> None:
        running.worker = worker
        self._cells[worker] = running.lease
        self._running[worker] = running
        if self._waiters:
            self._meter.started(running.lease, lending=self._idle_ticks > 0)

    def _unhold(self, running: RunningCell) -> None:
        """``running`` holds its slot no more: back to the cell that lent it, where that one waits for it."""
        worker = running.worker
        assert worker is not None
        running.worker = running.asleep_from = None
        running.looks.clear()
        del self._cells[worker], self._running[worker]
        self._meter.ended(running.lease)
        self._repay(running, worker)

    def _repay(self, borrower: RunningCell, worker: AgentWorker) -> None:
        """A slot ``borrower`` holds (or was lent) goes back to its lender, where that one waits for it."""
        lender, borrower.lender = borrower.lender, None
        if lender is None or not lender.paused:
            self._give_back(worker)
        elif worker.replaced or not worker.alive:
            self._give_back(worker)
            lender.taking = asyncio.ensure_future(self._take_back(lender))  # a slot from the queue, then
        else:
            self._continue(lender, worker)

    def _give_back(self, worker: AgentWorker) -> None:
        self._idle.release(worker)  # its holder's turn counts it no more
        if worker.replaced or not worker.alive:
            self._replace(worker)
        else:
            self._release(worker)

    def _turn_cells(self, now: float, idle_cpus: float) -> None:
        """Lend the slots of running cells seen asleep to the cells that wait longest, where each borrower's cell
        ends within what the lender may stand paused, or the lender may not be paused and lends awake (see
        ``cell_turns.py``)."""
        borrowers = [r for r in self._borrowers if r.offer is not None and not r.offer.done()]
        if not borrowers:
            for running in self._running.values():
                running.asleep_from = None  # looked at afresh when cells wait again
                running.looks.clear()
            return
        idle = cell_turns.machine_idle(self.cpus, idle_cpus)
        # The cells of one worker (a fork's copies) are measured together (cell_turns.asleep's ``share``).
        share = collections.Counter(id(r.lease.worker) for r in self._running.values())
        read: dict[int, float | None] = {}  # each worker's processes read once a tick (a family's: one tree)

        def demand_of(lease: SessionLease) -> Callable[[], float | None]:
            key = id(lease.worker)
            return lambda: read[key] if key in read else read.setdefault(key, lease.demand_s())

        # One of a worker's cells at most lends a tick, its oldest (a family's copies cannot be told apart).
        oldest: dict[int, RunningCell] = {}
        for r in sorted(self._running.values(), key=lambda r: r.since):
            oldest.setdefault(id(r.lease.worker), r)
        lenders = [
            r
            for r in oldest.values()
            if r.may_lend() and cell_turns.asleep(r, now, idle, share[id(r.lease.worker)], demand_of(r.lease))
        ]
        # The cell that has waited longest is not passed over for good: where no running cell could ever lend to
        # it by a pause, no pause is lent (a pause stretches its lender's life, which it waits for), so it has the
        # next slot that comes free, as it would with no pauses. A lender awake lends to any cell, it first.
        room = max((r.pause_left() for r in self._running.values() if r.may_lend() and r.pausable), default=0.0)
        if not cell_turns.fits(borrowers[0], room):
            lenders = [r for r in lenders if r.lends_awake()]
        for borrower in borrowers:  # the longest waiting first
            # A pause keeps the CPUs to the slots: a lender awake lends only where no pausable one fits.
            fit = (r for r in lenders if cell_turns.may_borrow(borrower, r))
            lender = min(fit, key=lambda r: r.lends_awake(), default=None)
            if lender is None:
                continue
            lenders.remove(lender)
            worker = lender.worker
            assert worker is not None and borrower.offer is not None
            del self._cells[worker], self._running[worker]
            lender.worker = lender.asleep_from = None
            lender.looks.clear()
            lender.paused, lender.paused_at = True, now
            if lender.lends_awake():  # it runs on, and may compute: lending for runs still measures it
                self._awake.add(lender)
                self.cells_lent_awake += 1
            else:
                self._meter.ended(lender.lease)
                lender.lease.pause(True)
                self.cells_paused += 1
            borrower.lender = lender
            self._idle.hand(worker, borrower.client)
            borrower.offer.set_result(worker)

    def _continue(self, lender: RunningCell, worker: AgentWorker) -> None:
        """A slot comes back to a cell paused: it is continued (one lent awake holds it again)."""
        lender.paused, lender.taking = False, None
        awake = lender in self._awake
        if awake:
            self._awake.discard(lender)
        else:
            lender.paused_s += time.monotonic() - lender.paused_at
        lender.since = time.monotonic()
        self._idle.hand(worker, lender.client)
        self._hold(lender, worker)
        if not awake:
            lender.lease.pause(False)

    async def _take_back(self, lender: RunningCell) -> None:
        """The slot a paused cell lent is gone with its worker: it takes the queue's next, then is continued."""
        worker = await self._slot_for(lender)
        if lender.paused:
            self._continue(lender, worker)
        else:
            self._give_back(worker)

    def _own_slot(self, worker: AgentWorker) -> bool:
        """Whether a cell may take ``worker``: one of the pool's own (a lent one is for runs, which can stand paused;
        one left free while only cells wait is parked by lending's next tick)."""
        return worker.slot < self.size
