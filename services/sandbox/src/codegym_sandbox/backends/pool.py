"""A fixed number of worker slots behind a bounded wait queue: what every backend shares.

A slot serves one run at a time; runs wait for a free slot, and past ``queue_size`` waiting runs the next
one is refused at once (:class:`Saturated`), never piled up. A worker that dies, idle or busy, is replaced
in the background and the run it held gets a :class:`SandboxFault`. A run cancelled (its client went away)
leaves the queue, or, on a worker, has that worker replaced the same way. A slot whose replacements keep
failing opens its circuit breaker: it stops retrying in a tight loop, waits, and shows as ``broken`` in
status.
"""

from __future__ import annotations

import asyncio
import logging
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
        self.queue_size = queue_size
        self.config = config
        self._idle: asyncio.Queue[AgentWorker] = asyncio.Queue()
        self._workers: list[AgentWorker | None] = []
        self.slots = [Slot() for _ in range(workers)]
        self.waiting = 0
        self.restarts = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.breaker_cooldown_s = BREAKER_COOLDOWN_S

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
        return sum(1 for w in self._workers if w is not None and not w.replaced) - self._idle.qsize()

    async def start(self) -> None:
        workers = [self.make_worker(i) for i in range(self.size)]
        self._workers = list(workers)
        results = await asyncio.gather(*(w.start() for w in workers), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.stop()
            raise errors[0]
        for w in workers:
            self._idle.put_nowait(w)
            self._watch(w)
        log.info("%s backend: %d workers ready", self.name, self.size)

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(w.kill() for w in self._workers if w is not None), return_exceptions=True)

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
        self.waiting += 1
        try:
            worker = await self._idle.get()
            while worker.replaced or not worker.alive:
                self._replace(worker)  # died while idle (killed from outside): never hand it a run
                worker = await self._idle.get()
        finally:
            self.waiting -= 1
        healthy = False
        try:
            outcome = await job(worker)
            healthy = True
            return outcome
        finally:
            # After a fault, a missed deadline or a cancellation the agent may be in the middle of an exchange
            # (or of a run nobody waits for): killing it is the only way to free the slot and keep frames in step.
            if healthy and not worker.replaced:
                self._idle.put_nowait(worker)
            else:
                self._replace(worker)

    def _replace(self, worker: AgentWorker) -> None:
        if worker.replaced or self._stopping:
            return
        worker.replaced = True
        # Take it out of the idle queue now, so that busy counts and the saturation check stay true.
        idle = [self._idle.get_nowait() for _ in range(self._idle.qsize())]
        for w in idle:
            if w is not worker:
                self._idle.put_nowait(w)
        self._spawn(self._restart(worker))

    async def _restart(self, worker: AgentWorker) -> None:
        self.restarts += 1
        await worker.kill()
        slot = self.slots[worker.slot]
        delay = 0.1
        while not self._stopping:
            fresh = self.make_worker(worker.slot)
            try:
                await fresh.start()
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
        }  # fmt: skip
