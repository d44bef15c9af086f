"""What the runs in flight hold, read on the pool's memory tick, and which must stand paused (see ``memory.py``).

A local worker's box and every process of its runs are in the worker's memory cgroup (``agent/memory_cgroup.py``),
whose count is the kernel's: every page they hold, files of a tmpfs and kernel memory included. The server
finds it once per agent, from ``/proc/PID/cgroup`` of a process under it, and then reads one file per run and
tick. A worker whose cgroup cannot be read (none could be made, or its box is not in one yet) counts as holding
its run's whole limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable

from ..agent.memory_cgroup import MemoryCgroup
from .memory import Lease, MemoryBudget

RUN_SHARE_MB = 64  # what a run is admitted by where what it holds is read: more than a Python program starts with
WATCH_TICK_S = 0.02  # how often what the runs hold is read while, grown to their limits, they would pass the budget
QUIET_TICK_S = 0.5  # otherwise (or as soon as a run is admitted)
_SEARCH = 64  # processes under an agent looked at to find its box's cgroup


def usage_file(pid: int) -> str | None:
    """The file that counts the memory of ``pid``'s memory cgroup, if it is a worker's."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            parts = path.split("/")
            if MemoryCgroup.PARENT not in parts[:-1]:
                continue
            # The worker's own, above its runs' cgroup (cgroup v2: run_cgroup.py makes it a child).
            path = "/".join(parts[: parts.index(MemoryCgroup.PARENT) + 2])
            if controllers == "":
                return f"/sys/fs/cgroup{path}/memory.current"
            if "memory" in controllers.split(","):
                return f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes"
    return None


def worker_cgroup(agent: int) -> str | None:
    """The usage file of the memory cgroup of the box under the agent ``agent``; None where there is none."""
    stack, seen = [agent], 0
    while stack and seen < _SEARCH:
        pid = stack.pop(0)
        seen += 1
        usage = usage_file(pid) if pid != agent else None
        if usage is not None and os.path.exists(usage):
            return usage
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/task/{pid}/children") as f:
            stack.extend(int(c) for c in f.read().split())
    return None


def held_bytes(usage: str) -> int:
    """What the cgroup whose usage file is ``usage`` holds: its count less the page cache of files on disk, which
    the kernel takes back as soon as it is short (a file a run read, a runtime's binary: no run holds it, and
    one run's reads would otherwise be charged to every later run of the worker). A tmpfs file is no such page."""
    with open(usage, "rb") as f:
        total = int(f.read())
    v1 = usage.endswith(".usage_in_bytes")
    keys = (b"total_inactive_file", b"total_active_file") if v1 else (b"inactive_file", b"active_file")
    with open(os.path.join(os.path.dirname(usage), "memory.stat"), "rb") as f:
        cache = sum(int(value) for key, value in (line.split() for line in f) if key in keys)
    return max(0, total - cache)


class MemoryUse:
    """The MiB that each agent's worker holds, from its memory cgroup (found once per agent)."""

    def __init__(self) -> None:
        self._files: dict[int, str] = {}

    def mb(self, agent: int) -> int | None:
        usage = self._files.get(agent)
        if usage is None:
            usage = worker_cgroup(agent)
            if usage is None:
                return None
            self._files[agent] = usage
        try:
            return held_bytes(usage) >> 20
        except (OSError, ValueError):
            self._files.pop(agent, None)  # the agent is gone, or its box is being replaced
            return None

    def keep(self, agents: set[int]) -> None:
        """Forget the agents not among ``agents``: gone, their pids may be another process's."""
        for agent in self._files.keys() - agents:
            del self._files[agent]


class MemoryWatch:
    """The pool's memory tick: while the runs in flight, grown to their limits, would pass the budget (or some stand
    paused), it reads what each holds every ``WATCH_TICK_S``, pauses those that grow while they pass it, and has
    those paused go on as there is room (``pause``: the run's lease, and whether it stands paused)."""

    def __init__(self, budget: Callable[[], MemoryBudget]) -> None:
        self.budget = budget  # the pool's (the server replaces it after the pool is made)
        self.use = MemoryUse()
        self.paused = 0  # runs that stood paused, in all
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    def tick(self, runs: dict[Lease, int], pause: Callable[[Lease, bool], None]) -> None:
        """Read what the runs (lease -> its agent's pid) hold; pause those that must, continue those that may."""
        budget = self.budget()
        for lease, agent in runs.items():
            if not lease.full:  # one paused too: a call in flight as it stopped (a populating mmap) still grows it
                budget.update(lease, self.use.mb(agent))
        now = time.monotonic()
        chosen = budget.over(now)
        going = budget.resumable(sum(not lease.paused for lease in runs), now)
        # One chosen and let go on in the same tick (the oldest, where no other run goes on) is never paused: a
        # pause and a resume sent together would only cost it the agent's walk that stops its processes.
        for lease in chosen:
            if lease not in going:
                self.paused += 1
                pause(lease, True)
        for lease in going:
            if lease not in chosen:
                pause(lease, False)

    async def run(self, runs: Callable[[], dict[Lease, int]], pause: Callable[[Lease, bool], None]) -> None:
        while True:
            budget = self.budget()
            if budget.overcommitted or budget.paused:
                await asyncio.sleep(WATCH_TICK_S)
            else:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), QUIET_TICK_S)
            self.tick(runs(), pause)
