"""The pool's lent slots: started ahead and parked, given to runs by the lending tick, parked again after
their run, retired when unused (when, and how many: see ``lending.py``). Mixed into ``pool.WorkerPool``."""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any

from . import lending
from .base import Saturated, TooLarge
from .client_turns import FreeWorkers
from .lending import Warming, reserve
from .memory import Lease, MemoryBudget
from .slots import Slot, start_worker
from .worker import AgentWorker

log = logging.getLogger("codegym.sandbox.pool")


class LentSlots:
    """What of ``WorkerPool`` starts, parks and retires its lent slots (slots ``size`` to ``max_workers``)."""

    name: str
    size: int
    max_workers: int
    reserve_workers: int | None
    starts_ahead: bool
    cpus: int
    memory: MemoryBudget
    worker_cost_mb: int
    _worker_costs: dict[AgentWorker, Lease]
    slots: list[Slot]
    breaker_cooldown_s: float
    start_s: float
    lent: int
    _workers: list[AgentWorker | None]
    _idle: FreeWorkers[AgentWorker]
    _waiters: dict[int, float]
    _busy: set[AgentWorker]
    _doomed: set[AgentWorker]
    _starting: set[int]
    _parked: dict[int, float]
    _grants: int
    _no_starts_until: float
    _stopping: bool
    _warming: Warming

    def make_worker(self, slot: int) -> AgentWorker:
        raise NotImplementedError

    def _watch(self, worker: AgentWorker) -> None:
        raise NotImplementedError

    def _replace(self, worker: AgentWorker) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        raise NotImplementedError

    def _park_idle_lent(self) -> None:
        """Lent workers left open with no run waiting (a base worker took the run they were lent for)."""
        idle = [self._idle.get_nowait() for _ in range(self._idle.qsize())]
        for w in idle:
            if w.slot >= self.size and not w.replaced:
                self._parked[w.slot] = time.monotonic()
            else:
                self._idle.put_nowait(w)

    def _reserve(self) -> int:
        return reserve(self.max_workers - self.size, self.reserve_workers, self.memory.total_mb) * self.starts_ahead

    def _warm(self, now: float) -> bool:  # whether start-up still starts the reserve (lending.Warming)
        return self._warming.check(len(self._parked), self._reserve(), self._no_starts_until > 0, now)

    def _start_ahead(self, idle_cpus: float) -> None:
        """Start lent workers for this tick's grants, and more to keep the reserve parked: those a step at a
        time (starting scores of workers at once would only slow each down), and only while no run waits (the
        starts would take the CPUs that the runs lent parked workers start on) and no run computes on busy CPUs
        (a start takes CPU from it; lending waits for idle CPUs anyway)."""
        if time.monotonic() < self._no_starts_until:
            return
        # Nor a slot whose last worker is still being killed: its programs' host uid is the slot's (host_users.py).
        taken = self._starting | {w.slot for w in self._doomed}
        free = [i for i in range(self.size, self.max_workers) if self._workers[i] is None and i not in taken]
        calm = not self._waiters and (not self._busy or idle_cpus >= lending.LEND_IDLE_CPUS)
        missing = self._reserve() - len(self._parked) if calm else 0
        ahead = min(missing, lending.LEND_PER_CPU * self.cpus) - len(self._starting)
        for slot in free[: max(self._grants + ahead, 0)]:
            self._starting.add(slot)
            self._spawn(self._start_lent(slot))

    async def _start_lent(self, slot: int) -> None:
        try:  # its cost, for its life (worker_cost.py): none is started where the budget has no room for it now
            cost = await self.memory.acquire(self.worker_cost_mb, 0.0) if self.worker_cost_mb else None
        except (Saturated, TooLarge):
            self._starting.discard(slot)
            return
        worker = self.make_worker(slot)
        began = time.monotonic()
        try:
            await start_worker(worker)
        except BaseException as exc:
            if cost is not None:
                self.memory.release(cost)
            if not isinstance(exc, Exception):
                raise
            self.slots[slot].last_error = str(exc)
            log.warning("%s: lent worker %d failed to start: %s", self.name, slot, exc)
            # No more tries until the breaker's cooldown: a cause that fails every start (a broken runtime)
            # would otherwise be retried a step of workers at a time, every tick.
            self._no_starts_until = time.monotonic() + self.breaker_cooldown_s
            return
        finally:
            self._starting.discard(slot)
        if self._stopping:
            await worker.kill()
            if cost is not None:
                self.memory.release(cost)
            return
        if cost is not None:
            self._worker_costs[worker] = cost  # given back as it is killed (WorkerPool._kill)
        self.start_s = 0.7 * self.start_s + 0.3 * (time.monotonic() - began)
        self._workers[slot] = worker
        self._watch(worker)
        if self._grants > 0 and self._waiters:
            self._grants -= 1
            self.lent += 1
            self._idle.put_nowait(worker)
        else:
            self._parked[worker.slot] = time.monotonic()

    def _give_back_cost(self, worker: AgentWorker) -> None:
        """A lent worker is gone: its cost comes back to the budget."""
        if (cost := self._worker_costs.pop(worker, None)) is not None:
            self.memory.release(cost)

    def _retire(self, now: float) -> None:
        """Parked workers beyond the reserve, unused for RETIRE_AFTER_S, go away."""
        for slot in lending.retiring(self._parked, self._reserve(), now):
            worker = self._workers[slot]
            if worker is not None:
                self._replace(worker)
