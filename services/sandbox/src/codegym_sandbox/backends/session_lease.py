"""A session's lease: a worker that serves one session alone, and the memory the session may hold.

The pool lends its slots one run at a time; a session keeps its interpreter between calls, so it gets a
worker of its own, outside the slots (an idle session holds no slot a run could use), started as every worker
is (the backend's ``make_worker``: the same isolation as runs). Its memory limit is taken from the memory
budget for the session's whole life: the budget bounds what runs and sessions hold together. Closing the
lease kills the worker, and with it every process and file of the session (the agent's box and tmpfs go
with it), and gives the memory back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import RunRequest, SandboxFault

_CLOSE_GRACE_S = 5.0  # how long an agent whose channel was closed has to end its session's box

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..agent.session_frames import CellDone
    from .memory import Lease, MemoryBudget
    from .worker import AgentWorker


class SessionLease:
    """One session's worker and memory."""

    def __init__(self, budget: MemoryBudget, slots: set[int], worker: AgentWorker, memory: Lease) -> None:
        self.budget = budget
        self.slots = slots
        self.worker = worker
        self.memory = memory
        self.closed = False

    async def put_files(self, files: dict[str, tuple[bytes, int]]) -> None:
        await self.worker.put_files(files)

    async def cell(self, message: bytes, wall_s: float) -> tuple[CellDone, bytes]:
        return await self.worker.cell(message, wall_s)

    def demand_s(self) -> float | None:
        return self.worker.cell_demand_s()

    def pause(self, paused: bool) -> None:
        self.worker.pause(paused)

    async def close(self, busy: bool = False) -> None:
        """End the session's worker. An idle one by closing its channel first: the agent then kills its box
        (whose pid namespace takes every process of the session with it, stopped ones too), removes its cgroups
        and exits; it is killed only past a grace (a box stopped between cells would not see its agent go, and
        keep the session's processes). One ``busy`` with a cell is killed at once: its box runs, and goes with
        its agent."""
        if self.closed:
            return
        self.closed = True
        try:
            await (self.worker.kill() if busy else self.worker.end(_CLOSE_GRACE_S))
        finally:
            self.budget.release(self.memory)
            self.slots.discard(self.worker.slot)


def next_slot(used: set[int], first: int, count: int, last: int | None) -> int | None:
    """The first free slot of ``first`` .. ``first + count - 1`` after ``last`` (the one given last), round
    the range: not the lowest free one, so that a slot (and its programs' host user) comes back to another
    session only after every other free slot was given, long after the processes of its last one are gone.
    None: every slot is in use."""
    start = 0 if last is None else last + 1 - first
    for i in range(count):
        slot = first + (start + i) % count
        if slot not in used:
            return slot
    return None


async def open_lease(
    budget: MemoryBudget,
    make_worker: Callable[[int], AgentWorker],
    slots: set[int],
    slot: int,
    request: RunRequest,
    memory_mb: int,
) -> SessionLease:
    """A started worker holding ``request``'s kernel, or :class:`~.base.Saturated` when the memory budget has
    no room for ``memory_mb`` now (a session never waits for memory: its client is told to come back)."""
    memory = await budget.acquire(memory_mb, 0.0)
    slots.add(slot)  # in use until the lease is closed
    worker = make_worker(slot)
    lease = SessionLease(budget, slots, worker, memory)
    try:
        await worker.start()
        await worker.open_kernel(request)
    except BaseException as exc:
        await lease.close()
        if isinstance(exc, SandboxFault | OSError):
            raise SandboxFault(f"a session could not start: {exc}") from exc
        raise
    return lease
