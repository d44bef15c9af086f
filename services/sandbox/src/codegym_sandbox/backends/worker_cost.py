"""What a container costs the host beside the memory limits of what it serves: charged to the memory budget.

A run is charged its memory limit and a session its own, but each container holds more for as long as it lives:
its agent and box (two interpreters, in the container's memory cgroup, which no run's or session's limit counts)
and its engine's processes on the host (docker's ``containerd-shim``; podman's ``podman run -i`` client and
``conmon``). Measured on a 2-CPU host: docker about 32 MiB a container (its cgroup 19, the shim 13), podman about
57 (its cgroup 20, the client 36, conmon 1); a session of 16 MiB cost the host 50 to 75 MiB. So each container is
charged its cost (``WorkerPool.worker_cost_mb``) with what it serves: the pool's own workers, which live as long
as the server, off the budget at start; a lent worker while it lives; a session's with its memory limit.

The cost is the more of a floor per backend (``WorkerPool.least_worker_cost_mb``: the figures above) and what
the pool's first worker is measured to hold once started (:func:`measure_mb`). The floor stands because one
container measured at start shows too little: its agent and box have run nothing yet (each grows as it runs
programs), and what the engine's processes share with each other (their binaries' pages) cannot be told from
what each adds. The measurement raises the cost where an engine holds more than the floor. The local backend's
workers are no containers: their agents (a few MiB each) come out of the margin the budget leaves
(``memory.default_budget_mb``), their boxes counted with their runs where each worker has a memory cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

from .base import SandboxFault
from .memory import MemoryBudget
from .memory_use import held_bytes
from .worker import AgentWorker


def parent_pid(pid: int) -> int:
    """``pid``'s parent (0: gone)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
    return 0


def cgroup_usage_file(pid: int) -> str | None:
    """The file that counts the memory of ``pid``'s memory cgroup (a container's, for its init), where it is seen."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers == "":
                candidate = f"/sys/fs/cgroup{path}/memory.current"
            elif "memory" in controllers.split(","):
                candidate = f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes"
            else:
                continue
            if os.path.exists(candidate):
                return candidate
    return None


def private_kb(pid: int) -> int:
    """What ``pid`` holds of its own, in KiB: its anonymous and shared-memory pages (its binary's pages are shared
    with every other copy of it)."""
    held = 0
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssShmem:")):
                held += int(line.split()[1])
    return held


def measure_mb(agent: int, engine: list[int]) -> int | None:
    """What the container whose init is ``agent`` costs the host, in MiB: its memory cgroup's count (less the page
    cache of files on disk, as a run's is read) and what ``engine``'s processes for it hold of their own. None where
    the container's cgroup cannot be read (a server in a container of its own)."""
    usage = cgroup_usage_file(agent) if agent else None
    if usage is None:
        return None
    try:
        held = held_bytes(usage)
    except (OSError, ValueError):
        return None
    held += sum(private_kb(pid) for pid in engine if pid > 1 and pid != os.getpid()) << 10
    return -(-held // (1 << 20))


def cost_mb(least_mb: int, agent: int, engine: list[int]) -> int:
    """A container's cost: ``least_mb``, or what :func:`measure_mb` finds where that is more."""
    measured = measure_mb(agent, engine) if least_mb else None
    return max(least_mb, measured or 0)


async def charge_own(
    budget: MemoryBudget, least_mb: int, workers: list[AgentWorker], stop: Callable[[], Awaitable[None]]
) -> int:
    """The cost of each of a pool's own ``workers`` (just started: the first is measured), taken off ``budget`` for
    good, as they live as long as the server. Where the budget cannot hold them the pool is stopped (``stop``) and
    :class:`SandboxFault` says why."""
    if not least_mb or not workers:
        return 0
    cost = await asyncio.to_thread(cost_mb, least_mb, workers[0].seen_pid, workers[0].engine_pids())
    left = budget.total_mb - len(workers) * cost
    if left <= 0:
        await stop()
        raise SandboxFault(
            f"the memory budget ({budget.total_mb} MiB) cannot hold the {len(workers)} workers at {cost} MiB each "
            "(MEMORY_BUDGET_MB)"
        )
    budget.total_mb = left
    return cost
