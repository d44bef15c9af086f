"""The memory budget: the sum of the memory limits of the runs in flight stays within what the machine has.

Each run may hold up to its memory limit; a pool of many workers (lent ones included) could otherwise start
more runs than the machine holds, and the kernel's OOM killer would pick among them (or the server). A run
takes its limit from the budget before it may take a worker and gives it back when it ends; a run that finds
the budget spent waits for it in the queue, first come first served, as it waits for a worker.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque

from .base import Saturated, TooLarge

MARGIN_FRACTION = 8  # the budget leaves an eighth of the machine (at least MARGIN_MIN_MB) to all else
MARGIN_MIN_MB = 1024


def machine_memory_mb() -> int:
    """The memory this server may use: the machine's (``MemTotal``), or its cgroup's limit where lower."""
    total = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    limit = _cgroup_limit_mb()
    if limit is not None and (total == 0 or limit < total):
        return limit
    return total or 4096  # no /proc: an assumption, logged by nobody, overridden by the setting


def _cgroup_limit_mb() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), if any."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidate = f"/sys/fs/cgroup{path}/memory.max"
        elif "memory" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"
            if not os.path.exists(candidate):  # the namespace's own root is all that is mounted
                candidate = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
        else:
            continue
        try:
            with open(candidate) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value.isdigit() and int(value) < 1 << 50:  # "max", or v1's "no limit" (near 2**63)
            return int(value) >> 20
    return None


def default_budget_mb() -> int:
    """The budget when none is configured: the machine's memory less a margin for the server, its workers
    (an agent holds a few MiB) and the system."""
    total = machine_memory_mb()
    return max(total - max(total // MARGIN_FRACTION, MARGIN_MIN_MB), 256)


class MemoryBudget:
    """A first-come-first-served share of ``total_mb`` among the runs in flight."""

    def __init__(self, total_mb: int) -> None:
        self.total_mb = total_mb
        self.held_mb = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def check(self, mb: int) -> None:
        """Refuse a run that could never fit (:class:`TooLarge`): waiting would be forever."""
        if mb > self.total_mb:
            raise TooLarge(mb, self.total_mb)

    async def acquire(self, mb: int, wait_s: float | None = None) -> None:
        """Take ``mb`` from the budget, waiting behind earlier runs for it at most ``wait_s`` seconds
        (:class:`Saturated` past it)."""
        self.check(mb)
        if not self._waiting and self.held_mb + mb <= self.total_mb:
            self.held_mb += mb
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (mb, granted)
        self._waiting.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(granted), wait_s)
        except BaseException as exc:
            if granted.done() and not granted.cancelled():
                self.release(mb)  # granted as it was cancelled or timed out: give it back
            else:
                granted.cancel()
                self._waiting.remove(entry)
                self._wake()  # a smaller run behind it may fit now
            if isinstance(exc, asyncio.TimeoutError):
                raise Saturated(retry_after_s=1, waited_s=wait_s) from None
            raise

    def release(self, mb: int) -> None:
        self.held_mb -= mb
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self.held_mb + self._waiting[0][0] <= self.total_mb:
            mb, granted = self._waiting.popleft()
            self.held_mb += mb
            granted.set_result(None)
