"""A worker slot's health: restarting its worker after a failure, and the circuit breaker around that."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from .worker import AgentWorker

log = logging.getLogger("codegym.sandbox.pool")

BREAKER_FAILURES = 3  # failed starts in a row that open a slot's breaker
BREAKER_COOLDOWN_S = 30.0  # how long an open breaker waits before the next try, unless configured


async def start_worker(worker: AgentWorker) -> None:
    """``worker.start()``; cancelled meanwhile (the pool is stopping), it leaves nothing behind."""
    try:
        await worker.start()
    except asyncio.CancelledError:
        await asyncio.shield(worker.kill())
        raise


class Slot:
    """Health of one slot, as /readyz reports it."""

    def __init__(self) -> None:
        self.failures = 0
        self.last_error: str | None = None
        self.broken_since: float | None = None

    def state(self) -> str:
        return "broken" if self.broken_since is not None else "ok"

    async def restart(
        self,
        make: Callable[[], AgentWorker],
        start: Callable[[AgentWorker], Awaitable[None]],
        stopping: Callable[[], bool],
        cooldown_s: float,
        what: str,
    ) -> AgentWorker | None:
        """A started worker from ``make``, tried until one starts (None: the pool stopped meanwhile): at
        growing intervals, and after BREAKER_FAILURES failures in a row every ``cooldown_s``, shown as broken."""
        delay = 0.1
        while not stopping():
            fresh = make()
            try:
                await start(fresh)
            except Exception as exc:
                self.failures += 1
                self.last_error = str(exc)
                # The message, not the exception: a kept log record must not keep its traceback's frames alive.
                log.error("%s failed to restart: %s", what, self.last_error)
                if self.failures >= BREAKER_FAILURES:
                    if self.broken_since is None:
                        self.broken_since = time.time()
                        log.error("%s: breaker open, next try in %.0f s", what, cooldown_s)
                    await asyncio.sleep(cooldown_s)
                else:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                continue
            self.failures, self.broken_since = 0, None
            return fresh
        return None
