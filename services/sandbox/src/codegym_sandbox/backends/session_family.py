"""A session's copies on the server: one worker serving the session and every copy forked from it.

A fork (``agent/session_family.py``) leaves the session's worker serving several sessions, its *members*, each a
copy of the kernel with an agent process of its own: from then on every frame to that worker names its
member, and every answer too, and the members' cells run side by side. :class:`Family` is that worker: one
task reads its answers and hands each to the call that waits for it; a member's session is a
:class:`MemberLease`. A member that ends is killed in the worker (its pid namespace goes with it); the
worker ends with its last member.

What a family holds: every member's memory limit, and the memory of each kernel a fork copied (its copies share
its pages, charged to its cgroup: see ``agent/kernel_copy.py``), until the family ends; and the host user of each
member (a sessions' slot): a copy's until a while after it ends, the worker's own until the family ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, cast

from ..agent.protocol import WAIT_CREDIT, RunFrame, encode_frame
from ..agent.session_frames import CellDone, CellFrame, read_cell_done
from . import cell_pause
from .base import SandboxFault
from .cell_pause import AnswerDeadline

if TYPE_CHECKING:
    from .memory import Lease, MemoryBudget
    from .worker import AgentWorker

_KERNEL_GRACE_S = 10.0  # beyond a cell's bound: the agent's own grace, and taking the member down
_FORK_S = 60.0  # how long a fork may take to answer (the copies' files are copied)
_END_GRACE_S = 5.0
_SLOT_BACK_S = 10.0  # after a member's end, when its sessions' slot (its programs' host user) serves again


class ForkRefused(Exception):
    """The session cannot be forked now (the agent's reason: it runs threads or other processes, say)."""


class Family:
    """A worker whose session was forked, and its members."""

    def __init__(self, worker: AgentWorker, budget: MemoryBudget, slots: set[int], held: list[Lease]) -> None:
        self.worker, self.budget, self.slots = worker, budget, slots
        self.own_slots = {worker.slot}  # the host users of the family, given back as the family ends
        self.slot_of: dict[int, int] = {}  # each member's sessions' slot, until given back
        self.held = held  # the memory of the kernels copied (their pages, shared with their copies)
        self.live: set[int] = set()
        self.next_member = 1
        self.pending: dict[int, asyncio.Future[tuple[dict[str, object], list[bytes]]]] = {}
        self.deadlines: dict[int, AnswerDeadline] = {}  # of each member's answer awaited (see cell_pause.py)
        self.closed = False
        self.reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Read the worker's answers from now on (after the answer to its first fork, read as any other)."""
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                header, blobs = await self.worker._read()
                member = cast("int", header.get("member"))
                if header.get("op") == "ended" and header.get("gone") is True:
                    self.give_back(member)  # no process of it is left: its user may serve another at once
                waiter = self.pending.pop(member, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((header, blobs))
                # else: the answer to an end, or to a call its caller gave up
        except SandboxFault as exc:
            for waiter in self.pending.values():
                if not waiter.done():
                    waiter.set_exception(exc)
            self.pending.clear()

    def give_back(self, member: int) -> None:
        """Give ``member``'s sessions' slot back (the family's own, its worker's, stays until the family ends);
        once only, and never one the family no longer holds (it may be another session's by then)."""
        slot = self.slot_of.pop(member, None)
        if slot is not None and slot != self.worker.slot and slot in self.own_slots:
            self.own_slots.discard(slot)
            self.slots.discard(slot)

    async def ask(
        self, member: int, header: dict[str, object], blobs: list[bytes], answer_by: float
    ) -> tuple[dict[str, object], list[bytes]]:
        if self.reader is None or self.reader.done():
            raise SandboxFault(f"worker {self.worker.slot} went away")
        waiter = asyncio.get_running_loop().create_future()
        self.pending[member] = waiter
        deadline = self.deadlines[member] = AnswerDeadline(
            begun=True
        )  # before the frame: a pause may come as it is sent
        try:
            self.worker._write(encode_frame({**header, "member": member}, blobs))
            await self.worker._drain()
            async with deadline.scope(answer_by):
                answer: tuple[dict[str, object], list[bytes]] = await waiter
            return answer
        except (asyncio.TimeoutError, ConnectionError, OSError) as exc:
            raise SandboxFault(f"worker {self.worker.slot} did not answer") from exc
        finally:
            if self.pending.get(member) is waiter:
                del self.pending[member]
            if self.deadlines.get(member) is deadline:
                del self.deadlines[member]

    def pause(self, member: int, paused: bool) -> None:
        """Pause ``member``'s running cell, or continue it (``cell_pause.py``)."""
        with contextlib.suppress(OSError, RuntimeError):  # gone: its cell's answer says so
            self.worker._write(cell_pause.frame(paused, member))
        if (deadline := self.deadlines.get(member)) is not None:
            deadline.hold(paused)

    async def fork(self, member: int, request: dict[str, object], members: list[int]) -> None:
        """Fork ``member`` (whose agent answers for the copies in ``members``, its own first)."""
        header, _ = await self.ask(member, {**request, "members": members}, [], _FORK_S)
        _forked(header, members)

    async def end_member(self, member: int, busy: bool) -> None:
        """End one member (its copy is killed in the worker), and the worker with the last."""
        self.live.discard(member)
        if self.live:
            # A worker gone meanwhile: its transport closed (RuntimeError), or its pipe (OSError).
            with contextlib.suppress(SandboxFault, OSError, ConnectionError, RuntimeError):
                self.worker._write(encode_frame({"op": "end", "member": member}))
                await self.worker._drain()
            return
        if self.closed:
            return
        self.closed = True
        try:
            await (self.worker.kill() if busy else self.worker.end(_END_GRACE_S))
        finally:
            if self.reader is not None:
                self.reader.cancel()
            for lease in self.held:
                self.budget.release(lease)
            self.held.clear()
            self.slots.difference_update(self.own_slots)
            self.own_slots.clear()  # given back: a member's late give-back (MemberLease) must not take one again
            self.slot_of.clear()


def _forked(header: dict[str, object], members: list[int]) -> None:
    """Read a fork's answer: the members it made, or why it was refused."""
    if header.get("op") == "forked" and header.get("members") == members:
        return
    error = str(header.get("error", "an answer that is not a fork's"))
    if header.get("refused"):
        raise ForkRefused(error)
    raise SandboxFault(f"the fork failed: {error}")


class MemberLease:
    """One member of a family: a session's lease (``base.SessionLease``), its memory and its sessions' slot (its
    programs' host user; the worker's own is the family's, given back as the family ends)."""

    def __init__(self, family: Family, member: int, memory: Lease, slot: int) -> None:
        self.family, self.member, self.memory, self.slot = family, member, memory, slot
        self.closed = False
        family.live.add(member)

    @property
    def worker(self) -> AgentWorker:
        return self.family.worker

    async def put_files(self, files: dict[str, tuple[bytes, int]]) -> None:
        raise SandboxFault("a session's copy takes no files but its parent's")

    async def cell(self, message: bytes, wall_s: float) -> tuple[CellDone, bytes]:
        header: CellFrame = {"op": "cell", "wall_s": wall_s, "blobs": [len(message)]}
        answer_by = wall_s * (1 + WAIT_CREDIT) + _KERNEL_GRACE_S
        frame, out = await self.family.ask(self.member, cast("dict[str, object]", header), [message], answer_by)
        done = self.worker._answer(read_cell_done, {k: v for k, v in frame.items() if k != "member"}, len(out))
        if done["op"] == "error":
            raise self.worker._fault(done)
        return done, out[0]

    def demand_s(self) -> float | None:
        return self.worker.cell_demand_s()

    def pause(self, paused: bool) -> None:
        self.family.pause(self.member, paused)

    async def close(self, busy: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.family.end_member(self.member, busy)
        finally:
            self.family.budget.release(self.memory)
            # Its user may serve another session once its processes are gone: its agent kills them as it reads the
            # end (agent/kernel_place.py), and says so (Family.give_back); where it does not, given back well after.
            if self.slot != self.family.worker.slot:
                asyncio.get_running_loop().call_later(_SLOT_BACK_S, self._give_back_slot)

    def _give_back_slot(self) -> None:
        self.family.give_back(self.member)


async def fork_lease(
    lease: object,
    copies: list[tuple[int, Lease]],
    parent_memory: Lease,
    budget: MemoryBudget,
    slots: set[int],
    first_slot: int,
    reseed: bool,
    memory_mb: int,
    cpu_s: float,
) -> list[MemberLease]:
    """Fork the session of ``lease`` (a worker's first session, or a family's member) into ``copies`` (each a
    sessions' slot, which gives its host user, and its memory); its own next lease (``parent_memory``) first.
    The lease forked is retired, its memory held by the family; a refusal leaves it as it was."""
    from ..agent.host_users import FORK_BASE
    from .session_lease import SessionLease

    request: dict[str, object] = {
        "op": "fork",
        "users": [0] + [FORK_BASE + slot - first_slot for slot, _ in copies],
        "reseed": reseed,
        "memory_bytes": memory_mb << 20,
        "cpu_s": cpu_s,
    }
    if isinstance(lease, SessionLease):
        members = [0, *range(1, len(copies) + 1)]
        frame, _ = await lease.worker._ask(cast("RunFrame", {**request, "members": members}), [], _FORK_S)
        if lease.closed:
            # Ended while it was forked (deleted): its worker is killed, and its host user and memory given back
            # (perhaps to another session by now). A family made of it would hold them again, and give them back
            # once more as it ends.
            raise SandboxFault(f"worker {lease.worker.slot}'s session ended while it was forked")
        _forked(frame, members)
        family = Family(lease.worker, budget, slots, [])
        family.start()
        family.held.append(lease.memory)
        lease.closed = True  # its worker and memory are the family's now
        parent, slot = 0, lease.worker.slot
        family.next_member = len(members)
    elif isinstance(lease, MemberLease):
        family, parent, slot = lease.family, lease.member, lease.slot
        # Numbered before the fork is sent: another member's fork meanwhile takes the next numbers.
        members = [parent, *range(family.next_member, family.next_member + len(copies))]
        family.next_member += len(copies)
        await family.fork(parent, request, members)
        if not lease.closed:  # else ended while it was forked: its memory was given back as its kernel was killed
            family.held.append(lease.memory)
        lease.closed = True
        family.live.discard(parent)
    else:
        raise TypeError(f"not a session's lease: {lease!r}")
    family.own_slots.update(slot for slot, _ in copies)
    family.slot_of.update({member: slot for member, (slot, _) in zip(members[1:], copies, strict=True)})
    made = [MemberLease(family, parent, parent_memory, slot)]
    pairs = zip(members[1:], copies, strict=True)
    made += [MemberLease(family, member, memory, copy_slot) for member, (copy_slot, memory) in pairs]
    return made
