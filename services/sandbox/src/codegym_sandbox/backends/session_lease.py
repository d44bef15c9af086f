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

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.worker.kill()
        finally:
            self.budget.release(self.memory)
            self.slots.discard(self.worker.slot)


async def open_lease(
    budget: MemoryBudget,
    make_worker: Callable[[int], AgentWorker],
    slots: set[int],
    first_slot: int,
    request: RunRequest,
    memory_mb: int,
) -> SessionLease:
    """A started worker holding ``request``'s kernel, or :class:`~.base.Saturated` when the memory budget has
    no room for ``memory_mb`` now (a session never waits for memory: its client is told to come back)."""
    memory = await budget.acquire(memory_mb, 0.0)
    # Slot numbers past the pool's own (``first_slot`` on, the lowest free one, in ``slots`` while used): a
    # worker's number is what tells its programs' host user apart.
    slot = first_slot
    while slot in slots:
        slot += 1
    slots.add(slot)
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
