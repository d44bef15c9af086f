"""A forked session's host users (sessions' slots) on the server: each serves one session or copy at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from codegym_sandbox.backends.session_family import Family, MemberLease


class _Worker:
    """What a family asks of its worker: its slot, frames to its agent, and its end."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.ended = False

    def _write(self, data: bytes) -> None:
        pass

    async def _drain(self) -> None:
        pass

    async def end(self, grace_s: float) -> None:
        self.ended = True

    async def kill(self) -> None:
        self.ended = True


class _Budget:
    def release(self, lease: Any) -> None:
        pass


def test_a_copys_slot_given_back_late_is_not_taken_from_the_session_that_has_it_now() -> None:
    # A copy's slot is given back a while after the copy ends; the family's end gives back every slot of it at
    # once. Given back again later, it was taken from whichever session had it by then, and the server could give
    # that session's own host user to a copy of another (the copy would be that session's user).
    async def main() -> None:
        slots = {100, 101}
        family = Family(_Worker(100), _Budget(), slots, [])  # type: ignore[arg-type]
        family.own_slots.add(101)
        family.slot_of[1] = 101
        family.live = {0, 1}
        copy = MemberLease(family, 1, None, 101)  # type: ignore[arg-type]
        session = MemberLease(family, 0, None, 100)  # type: ignore[arg-type]
        await copy.close()
        await session.close()  # the family's last member: it ends, and gives its slots back
        assert family.worker.ended and slots == set()  # type: ignore[attr-defined]
        slots.add(101)  # a new session's worker takes the slot
        copy._give_back_slot()  # the copy's give-back, due now
        assert slots == {101}

    asyncio.run(main())


def test_a_copys_slot_serves_again_once_its_agent_says_no_process_of_it_is_left() -> None:
    # Held for a while after the copy ended, a slot no session counted: a client forking and deleting copies in
    # a loop held every slot, and every other client's new session was refused.
    async def main() -> None:
        slots = {100, 101, 102}
        family = Family(_Worker(100), _Budget(), slots, [])  # type: ignore[arg-type]
        family.own_slots.update({101, 102})
        family.slot_of.update({1: 101, 2: 102})
        family.live = {0, 1, 2}
        one, two = MemberLease(family, 1, None, 101), MemberLease(family, 2, None, 102)  # type: ignore[arg-type]
        await one.close()
        await two.close()
        family.give_back(1)  # the agent's answer: its processes are gone
        assert slots == {100, 102}
        # Taken again at once by a new copy of the same family; the first copy's late give-back leaves it.
        slots.add(101)
        family.own_slots.add(101)
        family.slot_of[3] = 101
        one._give_back_slot()
        assert slots == {100, 101, 102}
        two._give_back_slot()  # a copy whose agent said nothing: given back after the while
        assert slots == {100, 101}

    asyncio.run(main())


class _Released(_Budget):
    def __init__(self) -> None:
        self.released: list[Any] = []

    def release(self, lease: Any) -> None:
        self.released.append(lease)


def test_a_session_ended_while_it_was_forked_gives_nothing_back_twice() -> None:
    # A delete that lands as a first fork's answer comes back: the session's end killed its worker and gave back
    # its host user and memory, the user perhaps to another session by then. A family made of it held that user
    # again and gave it back once more as it ended: two sessions on one host user.
    from codegym_sandbox.backends.base import SandboxFault
    from codegym_sandbox.backends.session_family import fork_lease
    from codegym_sandbox.backends.session_lease import SessionLease

    async def main() -> None:
        slots, budget = {100, 101}, _Released()
        worker = _Worker(100)
        session = SessionLease(budget, slots, worker, "memory")  # type: ignore[arg-type]

        async def ask(frame: Any, blobs: Any, wait_s: float) -> tuple[dict[str, Any], list[bytes]]:
            await session.close(busy=True)  # deleted while the agent forked
            slots.add(100)  # and its host user given to a new session at once
            return {"op": "forked", "members": frame["members"]}, []

        worker._ask = ask  # type: ignore[attr-defined]
        try:
            await fork_lease(session, [(101, "copy")], "next", budget, slots, 100, False, 64, 10.0)  # type: ignore[arg-type]
        except SandboxFault:
            pass
        else:
            raise AssertionError("a fork of a session that ended gave leases")
        assert slots == {100, 101} and budget.released == ["memory"]  # the new session keeps its user

    asyncio.run(main())
