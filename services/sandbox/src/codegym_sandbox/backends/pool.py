"""Worker slots behind a bounded wait queue: what every backend shares.

A slot serves one run at a time; runs wait for a free slot, and past ``queue_size`` waiting runs the next
one is refused at once (:class:`Saturated`), never piled up. ``workers`` slots are always there (one per
CPU by default); while runs wait and the CPUs sit idle, workers are lent on top, up to ``max_workers``
(when, and how many: see ``lending.py``). Every run first takes a share of the memory budget (see
``memory.py``; what runs hold is read in ``memory_use.py``). A worker that dies, idle or busy, is replaced in
the background and the run it held gets a :class:`SandboxFault`; a run cancelled (its client went away)
leaves the queue, or has its worker replaced the same way. A slot whose replacements keep failing opens its
circuit breaker: it stops retrying in a tight loop, waits, and shows as ``broken`` in status. A worker that
comes free goes to the waiting run or cell of the client next in turn, not to the oldest (``client_turns.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any, TypeVar

from ..agent.protocol import WorkerConfig
from . import lending
from .base import RunOutcome, RunPolicy, RunRequest, Saturated
from .client_turns import FreeWorkers
from .lending import CpuIdle, DemandMeter, Measured, Ticker, Warming, keep_open, lend_now
from .lent import LentSlots
from .memory import MEMORY_PAUSE_SHARE, Lease, MemoryBudget, default_budget_mb, run_limit_mb, server_held_mb
from .memory_use import RUN_SHARE_MB, MemoryWatch
from .run_pauses import RunPauses
from .session_slots import SessionSlots
from .slots import BREAKER_COOLDOWN_S, Slot, start_worker
from .worker import AgentWorker
from .worker_cost import charge_own

log = logging.getLogger("codegym.sandbox.pool")
T = TypeVar("T")
STOP_GRACE_S = 3.0  # at a stop, how long the agents have to end on their own (their cgroups go with them)


class WorkerPool(LentSlots, SessionSlots):
    """Slots of :class:`AgentWorker`; subclasses say how a worker is made (:meth:`make_worker`)."""

    # Whether parked workers are started ahead for lending: not for containers (each is a container a user
    # sees, holding its memory), whose runs the pool cannot measure either.
    starts_ahead = True

    name = "pool"
    least_worker_cost_mb = 0  # what a worker costs the host at least beyond what it serves (worker_cost.py)

    def __init__(self, workers: int, queue_size: int, config: WorkerConfig) -> None:
        SessionSlots.__init__(self)
        self.size = workers
        self.max_workers = workers  # set by the server: lent slots come on top of ``size`` up to this
        self.reserve_workers: int | None = None  # set by the server: parked workers to keep (None: see reserve)
        self.queue_size, self.config = queue_size, config
        self.cpus = len(os.sched_getaffinity(0))
        self.memory = MemoryBudget(default_budget_mb())  # the server sets the configured budget
        # Charged to a run whose limits carry no memory bound of their own (a JVM's heap flag): set by the
        # server to the largest memory limit a request may ask for.
        self.unbudgeted_run_mb = 4096
        self.reads_memory = False  # whether runs are admitted by a share and charged what they hold (memory.py)
        self.release_uids: Callable[[], None] | None = None  # the programs' uids' reservation (program_users.py)
        # What each worker costs the host (set at start), and the lent ones' charges for it (worker_cost.py).
        self.worker_cost_mb, self._worker_costs = 0, dict[AgentWorker, Lease]()
        self._leases: dict[Lease, AgentWorker] = {}  # the runs on a worker: their share of the budget
        self._memory_watch = MemoryWatch(lambda: self.memory)
        self._idle: FreeWorkers[AgentWorker] = FreeWorkers()  # free workers, handed to waiters in turn
        self._workers: list[AgentWorker | None] = []
        self.slots = [Slot() for _ in range(workers)]
        self._waiters: dict[int, float] = {}  # id -> when it began to wait for a worker, oldest first
        self._windows: weakref.WeakValueDictionary[str, asyncio.Semaphore] = weakref.WeakValueDictionary()
        self._ids = itertools.count()
        self._starting: set[int] = set()  # lent slots being started
        self._parked: dict[int, float] = {}  # lent slot -> since when its worker is parked
        self._grants = 0  # runs this tick lent a worker that is still being started
        self._open = False  # the last tick found the CPUs idle: a lent worker whose run ends takes the next
        self._idle_ticks = 0  # ticks in a row, with runs waiting, that found the CPUs idle
        self._busy: set[AgentWorker] = set()
        self._doomed: set[AgentWorker] = set()  # replaced workers whose kill may not have run yet
        self.pauses = RunPauses()  # why each run stands paused (for the CPUs, for the memory budget)
        self._meter, self._ticker, self._warming = DemandMeter(), Ticker(), Warming()
        self.lent = 0  # runs lending gave a worker, in all
        self.gave_way = 0  # runs lent a worker as sleepers that stood paused for the CPUs when they computed, in all
        self.start_s = 0.0  # how long starting a worker takes here (a moving average)
        self._no_starts_until = 0.0  # a lent worker failed to start: none is started before this
        self.restarts, self._stopping, self._tasks = 0, False, set[asyncio.Task[None]]()
        self.breaker_cooldown_s = BREAKER_COOLDOWN_S

    @property
    def waiting(self) -> int:
        """Runs and cells that wait: for their share of the memory budget, or for a worker."""
        return len(self._waiters) + len(self._cell_waiters) + self.memory.waiting

    def make_worker(self, slot: int) -> AgentWorker:
        raise NotImplementedError

    @property
    def runtime_id(self) -> str:
        """What distinguishes this backend's results from another's (cache keys)."""
        return f"{self.name}:{self.tools.get('python3')}"

    @property
    def tools(self) -> dict[str, str | None]:
        """The tools the workers found: the first live worker speaks for all (they run the same image)."""
        for w in self._workers:
            if w is not None and w.tools:
                return w.tools
        return {}

    @property
    def busy(self) -> int:
        return len(self._busy)

    async def start(self) -> None:
        workers = [self.make_worker(i) for i in range(self.size)]
        self.max_workers = max(self.max_workers, self.size)
        self._workers = [*workers, *[None] * (self.max_workers - self.size)]
        self.slots += [Slot() for _ in range(self.max_workers - len(self.slots))]
        began = time.monotonic()
        results = await asyncio.gather(*(w.start() for w in workers), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.stop()
            raise errors[0]
        self.start_s = time.monotonic() - began
        self.worker_cost_mb = await charge_own(self.memory, self.least_worker_cost_mb, workers, self.stop)
        self._warming.start(time.monotonic())
        for w in workers:
            self._idle.put_nowait(w)
            self._watch(w)
        if self.max_workers > self.size:
            self._spawn(self._lend())
        log.info("%s backend: %d workers ready (up to %d when runs wait on I/O), memory budget %d MiB", self.name,
                 self.size, self.max_workers, self.memory.total_mb)  # fmt: skip

    async def stop(self) -> None:
        self._stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        try:
            # Let them end (a worker being started is killed on the way out), then end what serves, and again
            # what was being replaced: a kill cancelled before it ran would leave its process and channel open.
            await asyncio.gather(*tasks, return_exceptions=True)
            workers = {w for w in self._workers if w is not None} | self._doomed
            await asyncio.gather(*(w.end(STOP_GRACE_S) for w in workers), return_exceptions=True)
        finally:
            if self.release_uids is not None:  # no program of its runs is left as them (or the server is going)
                self.release_uids()

    def _check_queue(self) -> None:
        # Workers free but memory spent: the runs waiting for memory fill the queue as much.
        if (self._idle.empty() or self.memory.waiting) and self.waiting >= self.queue_size:
            raise Saturated(retry_after_s=1)

    def admit(self, policy: RunPolicy, alone: bool = False) -> RunPolicy:
        """``policy`` for a request admitted with all of its runs (runs made with it skip the queue check), or
        refuse it now. The queue bound is checked once, here, and the request's runs enter the pool through its
        client's window, ``max_workers`` at a time for all of that client's admitted requests: enough to take
        every worker, and no more in the queue, so that other clients' requests are admitted and their runs take
        turns with its own (a worker that comes free goes to the client next in turn). Entered as one, a request
        of thousands of runs filled the queue, and every other client was refused for as long as it ran; with a
        window a request, eleven requests of one client did. ``alone``: one execution (a compile and its run),
        in a window of its own."""
        self._check_queue()
        shared = policy.client and not alone
        window = self._windows.get(policy.client) if shared else None
        if window is None:  # a client's is kept while a request of the client holds it (its policy), then forgotten
            window = asyncio.Semaphore(self.max_workers)
            if shared:
                self._windows[policy.client] = window
        return replace(policy, admitted=True, window=window)

    async def run(self, request: RunRequest, policy: RunPolicy) -> RunOutcome:
        return await self._on_worker(request, policy, lambda worker, _: worker.run(request), [request.stdin])

    async def run_tests(self, request: RunRequest, stdins: list[bytes | None], policy: RunPolicy) -> list[RunOutcome]:
        """The same program on each input, one after another, on one worker (see ``AgentWorker.run_tests``)."""

        # Each test after the first is admitted by a share again: one that went on at its limit holds it no longer.
        def job(worker: AgentWorker, lease: Lease) -> Awaitable[list[RunOutcome]]:
            return worker.run_tests(request, stdins, lambda: self.memory.anew(lease))

        return await self._on_worker(request, policy, job, stdins)

    async def _on_worker(
        self,
        request: RunRequest,
        policy: RunPolicy,
        job: Callable[[AgentWorker, Lease], Awaitable[T]],
        stdins: list[bytes | None],
    ) -> T:
        if not policy.admitted:
            self._check_queue()
        # An admitted request's runs enter through its window (``admit``); another run alone.
        async with policy.window or contextlib.nullcontext():
            client = policy.client or f"#{next(self._ids)}"  # a run from no one named: a client of its own
            extra, wait_s = server_held_mb(request, stdins), policy.queue_wait_s
            # Where no cgroup holds one whose limits carry no memory bound: the largest limit, at most the room for it.
            unbound = max(min(self.unbudgeted_run_mb, self.memory.total_mb - extra), 1)
            mb = run_limit_mb(request.limits, unbound, held_by_cgroup=self.reads_memory)
            share = RUN_SHARE_MB if self.reads_memory else None
            deadline = None if wait_s is None else time.monotonic() + wait_s
            lease = await self.memory.acquire(mb, wait_s, share, extra, client)
            lease.pause_bound_s = MEMORY_PAUSE_SHARE * request.limits["wall_s"]
            self._memory_watch.wake()
            try:
                worker = await self._take(deadline, wait_s, client)
            except BaseException:
                self.memory.release(lease)
                raise
            return await self._job(worker, lease, job)

    async def _take(self, deadline: float | None, wait_s: float | None, client: str, cell: bool = False) -> AgentWorker:
        me, waiters = next(self._ids), self._cell_waiters if cell else self._waiters  # lending lends for runs
        waiters[me] = time.monotonic()
        try:
            while True:
                if self._idle.empty():  # it waits: lending looks now (one that finds a worker pays for no tick)
                    self._ticker.wake()
                worker = await self._next_idle(deadline, wait_s, client, cell)
                if not worker.replaced and worker.alive:
                    return worker
                self._idle.release(worker)
                self._replace(worker)  # died while idle (killed from outside): never hand it a run
        finally:
            del waiters[me]

    async def _job(self, worker: AgentWorker, lease: Lease, job: Callable[[AgentWorker, Lease], Awaitable[T]]) -> T:
        self._busy.add(worker)
        self._leases[lease] = worker
        if self._waiters:  # runs wait, and lending measures the runs: this one from its start
            self._meter.started(worker, lending=self._idle_ticks > 0)
        healthy = False
        try:
            outcome = await job(worker, lease)
            healthy = True
            return outcome
        finally:
            self._idle.release(worker)  # its client's turn counts it no more
            del self._leases[lease]
            self.memory.release(lease)
            self._busy.discard(worker)
            self.pauses.ended(worker)
            self._meter.ended(worker)
            # After a fault, a missed deadline or a cancellation the agent may be in the middle of an exchange
            # (or of a run nobody waits for): killing it is the only way to free the slot and keep frames in step.
            if healthy and not worker.replaced and not worker.retiring:
                self._release(worker)
            else:
                self._replace(worker)

    async def _next_idle(
        self, deadline: float | None, wait_s: float | None, client: str, own: bool = False
    ) -> AgentWorker:
        if own:  # a cell: only the pool's own workers (see session_slots)
            return await self._idle.get(client, self._own_slot)
        if deadline is None or not self._idle.empty():
            return await self._idle.get(client)
        try:
            return await asyncio.wait_for(self._idle.get(client), max(deadline - time.monotonic(), 0.0))
        except asyncio.TimeoutError:
            raise Saturated(retry_after_s=1, waited_s=wait_s) from None

    def _release(self, worker: AgentWorker) -> None:
        """A worker whose run ended well: back to the queue; a lent one only while the CPUs are idle and a run
        waits for it, else it is parked (no run that comes later may find it open: see ``lending``)."""
        if worker.slot >= self.size and not (self._open and self._waiters):
            self._parked[worker.slot] = time.monotonic()
        else:
            self._idle.put_nowait(worker)

    # -- lent slots -------------------------------------------------------------------------------------
    async def _lend(self) -> None:
        cpu, waited = CpuIdle(), True  # the first tick starts the reserve
        while not self._stopping:
            # A tick after the last with runs waiting parks what they were lent and no run took.
            lent = any(w.slot >= self.size for w in self._busy)  # measured on every tick: see lending.crowding
            await self._ticker.next(waited or lent or bool(self._waiters or self._cell_waiters or self._starting))
            waited = bool(self._waiters)
            try:
                self._lend_tick(time.monotonic(), cpu.sample())
            except Exception:  # one tick's fault must not end lending, cells' turns and warm starts for good
                log.exception("%s: a lending tick failed", self.name)

    def _lend_tick(self, now: float, idle_cpus: float) -> None:
        """Measure the runs, then lend (parked workers first), park, retire and start ahead as they say."""
        self._warm(now)  # before lending takes parked workers
        self._turn_cells(now, idle_cpus)  # cells that wait take the slots of those asleep
        self._grants = 0
        # A run whose worker is being killed wants nothing more; one that stands paused, nothing for now.
        busy = [w for w in self._busy if not w.replaced and w not in self.pauses.stood]
        lent = [w for w in busy if w.slot >= self.size]
        if self._waiters or lent or self.pauses.stood:  # else the runs go unmeasured (reading /proc for each costs)
            own: list[Measured] = [
                *(w for w in busy if w.slot < self.size),
                *self.cell_leases(),
            ]  # a cell is never crowded out
            known, unknown, ticks = self._meter.wants(own, lent, now)
            for worker in self._meter.crowding(lent, known, self.cpus):  # lent as sleepers, they now compute
                self.gave_way += 1
                self.pauses.crowded(worker)
            known = self.pauses.go_on(known, self.cpus, self._meter)
        if not self._waiters:  # lent workers left open are parked
            self._open, self._idle_ticks = False, 0
            self._park_idle_lent()
        else:
            if ticks == 0:  # the runs cannot be seen (in containers): the CPUs' idle time, which other work counts too
                known, ticks = self.cpus - idle_cpus, lending.LEND_IDLE_TICKS
            # A worker open but not busy while runs wait is about to take one (between runs, or in wait_for's hand-off,
            # off the queue a loop step before it counts busy): computing, or a tick in that gap lends beside runs.
            held = self._busy.union(self._cells)
            known += sum(w is not None and w not in held and w.slot not in self._parked for w in self._workers)
            self._open = keep_open(self.cpus, known + unknown)
            self._idle_ticks = self._idle_ticks + 1 if keep_open(self.cpus, known) else 0
            waited = now - next(iter(self._waiters.values()))
            if self._idle_ticks >= ticks and waited >= lending.LEND_AFTER_S:
                room = self.max_workers - len(self._busy) - len(self._cells) - self._idle.qsize()
                lend = lend_now(self.cpus, known, unknown, len(self._waiters), room)
                for slot in sorted(self._parked)[:lend]:  # the lowest slots: they alternate between the CPUs
                    del self._parked[slot]
                    self._idle.put_nowait(self._workers[slot])  # type: ignore[arg-type]  # parked: a worker
                    self.lent, lend = self.lent + 1, lend - 1
                self._grants = lend
        self._retire(now)
        self._start_ahead(idle_cpus)

    def _replace(self, worker: AgentWorker) -> None:
        if worker.replaced or self._stopping:
            return
        worker.replaced = True
        self._doomed.add(worker)
        # Take it out of the idle queue now, so that busy counts and the saturation check stay true.
        for w in [self._idle.get_nowait() for _ in range(self._idle.qsize())]:
            if w is not worker:
                self._idle.put_nowait(w)
        if worker.slot >= self.size:  # a lent slot is not restarted: it is started again when lending needs it
            if self._workers[worker.slot] is worker:
                self._parked.pop(worker.slot, None)
                self._workers[worker.slot] = None
            self._spawn(self._kill(worker))
            return
        self._spawn(self._restart(worker))

    async def _kill(self, worker: AgentWorker) -> None:
        await worker.kill()
        self._doomed.discard(worker)
        self._give_back_cost(worker)

    async def _restart(self, worker: AgentWorker) -> None:
        self.restarts += 1
        await self._kill(worker)
        fresh = await self.slots[worker.slot].restart(
            lambda: self.make_worker(worker.slot), start_worker, lambda: self._stopping,
            self.breaker_cooldown_s, f"{self.name} worker {worker.slot}",
        )  # fmt: skip
        if fresh is not None:
            self._workers[worker.slot] = fresh
            self._idle.put_nowait(fresh)
            self._watch(fresh)

    def _watch(self, worker: AgentWorker) -> None:
        """Replace a worker as soon as its agent exits, idle or not: readiness must not wait for a run."""

        async def watch() -> None:
            await worker.wait_exited()
            self._replace(worker)

        self._spawn(watch())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def status(self) -> dict[str, Any]:
        """``alive`` and ``lent_now``: workers open to runs (parked ones apart); ``warming``: see Warming."""
        target, warming = self._reserve(), self._warm(time.monotonic())
        up = [i for i, w in enumerate(self._workers) if w is not None and w.alive and not w.replaced]
        alive = sum(1 for i in up if i not in self._parked)
        broken = [{"slot": i, "since": s.broken_since, "error": s.last_error} for i, s in enumerate(self.slots)
                  if s.broken_since is not None]  # fmt: skip
        return {
            "backend": self.name, "workers": self.size, "alive": alive, "busy": self.busy,
            "queued": self.waiting, "restarts": self.restarts, "broken_slots": broken,
            "max_workers": self.max_workers, "lent_now": sum(1 for i in up if i >= self.size) - len(self._parked),
            "parked": len(self._parked), "reserve": target, "warming": warming, "starting": len(self._starting),
            "lent": self.lent, "worker_start_s": round(self.start_s, 3), "memory_budget_mb": self.memory.total_mb,
            "memory_held_mb": self.memory.held_mb, "memory_paused": self._memory_watch.paused,
            "cpu_gave_way": self.gave_way, "cells_paused": self.cells_paused,
            "cells_lent_awake": self.cells_lent_awake, "worker_cost_mb": self.worker_cost_mb,
        }  # fmt: skip
