"""Worker slots behind a bounded wait queue: what every backend shares.

A slot serves one run at a time; runs wait for a free slot, and past ``queue_size`` waiting runs the next
one is refused at once (:class:`Saturated`), never piled up. ``workers`` slots are always there (one per
CPU by default). When runs wait while the CPUs sit idle (the busy runs sleep or wait on I/O, as the tests
of RL datasets often do) the pool lends more slots, up to ``max_workers`` in all, so that a run that
sleeps never holds up one that would compute: each run's CPU time stays limited on its own. A lent slot
goes away once it has been idle for a while. A worker that dies, idle or busy, is replaced
in the background and the run it held gets a :class:`SandboxFault`. A run cancelled (its client went away)
leaves the queue, or, on a worker, has that worker replaced the same way. A slot whose replacements keep
failing opens its circuit breaker: it stops retrying in a tight loop, waits, and shows as ``broken`` in
status.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from .base import RunOutcome, RunRequest, Saturated
from .worker import AgentWorker

log = logging.getLogger("codegym.sandbox.pool")
T = TypeVar("T")

BREAKER_FAILURES = 3  # failed starts in a row that open a slot's breaker
# Set while a request admitted as a whole runs (see WorkerPool.admitted): its runs skip the per-run queue
# check, so a group of thousands of runs is never refused halfway, with part of its runs done for nothing.
ADMITTED: ContextVar[bool] = ContextVar("codegym_sandbox_admitted", default=False)

BREAKER_COOLDOWN_S = 30.0  # how long an open breaker waits before the next try, unless configured
# Lending: every LEND_TICK_S the pool looks at its queue; when the oldest run has waited LEND_AFTER_S and
# the busy runs wanted less than all but LEND_IDLE_CPUS of the CPUs over the last tick, every waiting run
# gets a slot of its own (up to max_workers). A tick later the new runs show whether they compute; if they
# do, lending stops there. What the runs want is measured on their own processes where the server sees them
# (local workers: the time they ran plus the time they waited to run, so that a run starved by other work
# on the machine still counts as computing); the server's HTTP work, its clients' and starting agents do
# not count. Elsewhere (in containers) it is the CPUs' idle time, which all of that does count. Lent slots
# idle for RETIRE_AFTER_S go away (RL training sends its runs in a burst per step: they stay for the next).
LEND_TICK_S = 0.1
LEND_AFTER_S = 0.2
LEND_IDLE_CPUS = 0.5
RETIRE_AFTER_S = 300.0
# A run that may wait for a slot at most this long (set per request by routes whose clients time out on
# their own): past it, the run is refused (``Saturated``) rather than left to run into the client's timeout.
QUEUE_WAIT_S: ContextVar[float | None] = ContextVar("codegym_sandbox_queue_wait_s", default=None)


class CpuIdle:
    """How many of this process's CPUs were idle since the last look, from ``/proc/stat``."""

    def __init__(self) -> None:
        self.cpus = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        self.last = self._read()

    def _read(self) -> dict[str, tuple[int, int]]:
        """CPU -> (idle, total) jiffies."""
        out: dict[str, tuple[int, int]] = {}
        try:
            with open("/proc/stat") as f:
                for line in f:
                    name, _, rest = line.partition(" ")
                    if name in self.cpus:
                        ticks = [int(x) for x in rest.split()]
                        out[name] = (ticks[3] + ticks[4], sum(ticks[:8]))  # idle + iowait; all but guest time
        except OSError:
            pass
        return out

    def sample(self) -> float:
        """Idle CPUs (a fraction of a CPU counts) since the previous sample; 0.0 when it cannot tell."""
        now = self._read()
        idle = 0.0
        for cpu, (i1, t1) in now.items():
            i0, t0 = self.last.get(cpu, (i1, t1))
            if t1 > t0:
                idle += (i1 - i0) / (t1 - t0)
        self.last = now
        return idle


class Slot:
    """Health of one slot, as /readyz reports it."""

    def __init__(self) -> None:
        self.failures = 0
        self.last_error: str | None = None
        self.broken_since: float | None = None

    def state(self) -> str:
        return "broken" if self.broken_since is not None else "ok"


class WorkerPool:
    """Slots of :class:`AgentWorker`; subclasses say how a worker is made (:meth:`make_worker`)."""

    name = "pool"

    def __init__(self, workers: int, queue_size: int, config: dict[str, Any]) -> None:
        self.size = workers
        self.max_workers = workers  # set by the server: lent slots come on top of ``size`` up to this
        self.queue_size = queue_size
        self.config = config
        self._idle: asyncio.Queue[AgentWorker] = asyncio.Queue()
        self._workers: list[AgentWorker | None] = []
        self.slots = [Slot() for _ in range(workers)]
        self._waiters: dict[int, float] = {}  # id -> when it began to wait, oldest first
        self._ids = itertools.count()
        self._lending: set[int] = set()  # lent slots being started
        self._idle_since: dict[int, float] = {}  # lent slot -> when its worker went back to the queue
        self._busy: set[AgentWorker] = set()
        self._doomed: set[AgentWorker] = set()  # replaced workers whose kill may not have run yet
        self._demand_seen: dict[AgentWorker, tuple[float, float]] = {}  # busy worker -> (when, demand_s())
        self.lent = 0  # lent slots started, in all
        self.restarts = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.breaker_cooldown_s = BREAKER_COOLDOWN_S

    @property
    def waiting(self) -> int:
        return len(self._waiters)

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
        return self.live - self._idle.qsize()

    @property
    def live(self) -> int:
        """Workers that serve runs now, lent ones included."""
        return sum(1 for w in self._workers if w is not None and not w.replaced)

    async def start(self) -> None:
        workers = [self.make_worker(i) for i in range(self.size)]
        self.max_workers = max(self.max_workers, self.size)
        self._workers = [*workers, *[None] * (self.max_workers - self.size)]
        self.slots += [Slot() for _ in range(self.max_workers - len(self.slots))]
        results = await asyncio.gather(*(w.start() for w in workers), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.stop()
            raise errors[0]
        for w in workers:
            self._idle.put_nowait(w)
            self._watch(w)
        if self.max_workers > self.size:
            self._spawn(self._lend())
        log.info("%s backend: %d workers ready (up to %d when runs wait on I/O)", self.name, self.size,
                 self.max_workers)  # fmt: skip

    async def stop(self) -> None:
        self._stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        # Let them end (a worker being started is killed on the way out), then kill what serves, and again
        # what was being replaced: a kill cancelled before it ran would leave its process and channel open.
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = {w for w in self._workers if w is not None} | self._doomed
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)

    def _check_queue(self) -> None:
        if self._idle.empty() and self.waiting >= self.queue_size:
            raise Saturated(retry_after_s=1)

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """Admit a request with all of its runs (tasks it starts inherit the admission), or refuse it now.

        The queue bound is checked once, here: an admitted group may take the queue past ``queue_size`` by
        its own size (at most ``max_runs_per_request``), and the next request waits for it to drain.
        """
        self._check_queue()
        token = ADMITTED.set(True)
        try:
            yield
        finally:
            ADMITTED.reset(token)

    async def run(self, request: RunRequest) -> RunOutcome:
        return await self._on_worker(lambda worker: worker.run(request))

    async def run_tests(self, request: RunRequest, stdins: list[bytes | None]) -> list[RunOutcome]:
        """The same program on each input, one after another, on one worker (see ``AgentWorker.run_tests``)."""
        return await self._on_worker(lambda worker: worker.run_tests(request, stdins))

    async def _on_worker(self, job: Callable[[AgentWorker], Awaitable[T]]) -> T:
        if not ADMITTED.get():
            self._check_queue()
        me = next(self._ids)
        self._waiters[me] = time.monotonic()
        try:
            worker = await self._next_idle(QUEUE_WAIT_S.get())
            while worker.replaced or not worker.alive:
                self._replace(worker)  # died while idle (killed from outside): never hand it a run
                worker = await self._next_idle(QUEUE_WAIT_S.get())
        finally:
            del self._waiters[me]
        self._idle_since.pop(worker.slot, None)
        self._busy.add(worker)
        healthy = False
        try:
            outcome = await job(worker)
            healthy = True
            return outcome
        finally:
            self._busy.discard(worker)
            self._demand_seen.pop(worker, None)
            # After a fault, a missed deadline or a cancellation the agent may be in the middle of an exchange
            # (or of a run nobody waits for): killing it is the only way to free the slot and keep frames in step.
            if healthy and not worker.replaced:
                self._release(worker)
            else:
                self._replace(worker)

    async def _next_idle(self, wait_s: float | None) -> AgentWorker:
        if wait_s is None:
            return await self._idle.get()
        try:
            return await asyncio.wait_for(self._idle.get(), wait_s)
        except asyncio.TimeoutError:
            raise Saturated(retry_after_s=1, waited_s=wait_s) from None

    def _release(self, worker: AgentWorker) -> None:
        if worker.slot >= self.size:
            self._idle_since[worker.slot] = time.monotonic()
        self._idle.put_nowait(worker)

    # -- lent slots -------------------------------------------------------------------------------------
    async def _lend(self) -> None:
        cpu = CpuIdle()
        while not self._stopping:
            await asyncio.sleep(LEND_TICK_S)
            idle_cpus = cpu.sample()
            now = time.monotonic()
            self._retire(now)
            runs_cpus = self._runs_cpus(now)  # before the checks below: every tick updates what was seen
            if not self._waiters or now - next(iter(self._waiters.values())) < LEND_AFTER_S:
                continue
            # A worker idle while runs wait is about to take one (between two runs): it counts as computing,
            # or a tick that falls in that gap would lend a worker to every waiting run.
            unused = idle_cpus if runs_cpus is None else len(cpu.cpus) - runs_cpus - self._idle.qsize()
            if unused < LEND_IDLE_CPUS:
                continue  # the runs compute: more of them at once would only share the same CPUs
            want = len(self._waiters) - len(self._lending)
            free = [
                i for i in range(self.size, self.max_workers) if self._workers[i] is None and i not in self._lending
            ]
            for slot in free[: max(want, 0)]:
                self._lending.add(slot)
                self._spawn(self._start_lent(slot))

    def _runs_cpus(self, now: float) -> float | None:
        """How many CPUs the busy runs wanted since the last tick; None when some run cannot be seen.

        A run seen for the first time counts as a whole CPU: nothing is known of it yet.
        """
        wanted = 0.0
        for worker in self._busy:
            demand = worker.demand_s()
            if demand is None:
                return None
            seen = self._demand_seen.get(worker)
            self._demand_seen[worker] = (now, demand)
            wanted += 1.0 if seen is None else max(demand - seen[1], 0.0) / max(now - seen[0], 1e-3)
        return wanted

    @staticmethod
    async def _start_worker(worker: AgentWorker) -> None:
        """``worker.start()``; cancelled meanwhile (the pool is stopping), it leaves nothing behind."""
        try:
            await worker.start()
        except asyncio.CancelledError:
            await asyncio.shield(worker.kill())
            raise

    async def _start_lent(self, slot: int) -> None:
        worker = self.make_worker(slot)
        try:
            await self._start_worker(worker)
        except Exception as exc:
            self.slots[slot].last_error = str(exc)
            log.warning("%s: lent worker %d failed to start: %s", self.name, slot, exc)
            return
        finally:
            self._lending.discard(slot)
        if self._stopping:
            await worker.kill()
            return
        self.lent += 1
        self._workers[slot] = worker
        self._release(worker)
        self._watch(worker)

    def _retire(self, now: float) -> None:
        """Lent workers idle for RETIRE_AFTER_S go away (with a run waiting, none is idle for long)."""
        old = [slot for slot, since in self._idle_since.items() if now - since >= RETIRE_AFTER_S]
        for slot in old:
            worker = self._workers[slot]
            if worker is not None:
                self._replace(worker)

    def _replace(self, worker: AgentWorker) -> None:
        if worker.replaced or self._stopping:
            return
        worker.replaced = True
        self._doomed.add(worker)
        # Take it out of the idle queue now, so that busy counts and the saturation check stay true.
        idle = [self._idle.get_nowait() for _ in range(self._idle.qsize())]
        for w in idle:
            if w is not worker:
                self._idle.put_nowait(w)
        if worker.slot >= self.size:  # a lent slot is not restarted: it is lent again when runs wait
            self._idle_since.pop(worker.slot, None)
            if self._workers[worker.slot] is worker:
                self._workers[worker.slot] = None
            self._spawn(self._kill(worker))
            return
        self._spawn(self._restart(worker))

    async def _kill(self, worker: AgentWorker) -> None:
        await worker.kill()
        self._doomed.discard(worker)

    async def _restart(self, worker: AgentWorker) -> None:
        self.restarts += 1
        await self._kill(worker)
        slot = self.slots[worker.slot]
        delay = 0.1
        while not self._stopping:
            fresh = self.make_worker(worker.slot)
            try:
                await self._start_worker(fresh)
            except Exception as exc:
                slot.failures += 1
                slot.last_error = str(exc)
                # The message, not the exception: a kept log record must not keep its traceback's frames alive.
                log.error("%s worker %d failed to restart: %s", self.name, worker.slot, slot.last_error)
                if slot.failures >= BREAKER_FAILURES:
                    if slot.broken_since is None:
                        slot.broken_since = time.time()
                        log.error("%s worker %d: breaker open, next try in %.0f s", self.name, worker.slot,
                                  self.breaker_cooldown_s)  # fmt: skip
                    await asyncio.sleep(self.breaker_cooldown_s)
                else:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                continue
            slot.failures, slot.broken_since = 0, None
            self._workers[worker.slot] = fresh
            self._idle.put_nowait(fresh)
            self._watch(fresh)
            return

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
        alive = sum(1 for w in self._workers if w is not None and w.alive and not w.replaced)
        broken = [
            {"slot": i, "since": s.broken_since, "error": s.last_error}
            for i, s in enumerate(self.slots)
            if s.broken_since is not None
        ]
        return {
            "backend": self.name, "workers": self.size, "alive": alive, "busy": self.busy,
            "queued": self.waiting, "restarts": self.restarts, "broken_slots": broken,
            "max_workers": self.max_workers, "lent_now": alive - sum(
                1 for w in self._workers[: self.size] if w is not None and w.alive and not w.replaced
            ), "lent": self.lent,
        }  # fmt: skip
