"""When a running cell is seen asleep (``backends/cell_turns.asleep``), on demand counts a test sets: the average
over the last window is what holding a slot costs, and a cell that has just woken to compute is not asleep."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from codegym_sandbox.backends.cell_turns import IDLE_RATE, LOOK_S, RunningCell, asleep
from codegym_sandbox.backends.client_turns import FreeWorkers
from codegym_sandbox.backends.session_slots import SessionSlots


def _looks(rate_at: list[float], share: int = 1) -> list[bool]:
    """``asleep`` at each look, LOOK_S apart, where the cell's processes ran ``rate_at[i]`` of a CPU before look i."""
    cell = RunningCell(lease=None, pausable=True, worker=None, since=0.0, limit_s=10.0)  # type: ignore[arg-type]
    demand, out = 0.0, []
    for i, rate in enumerate(rate_at):
        demand += rate * LOOK_S
        out.append(asleep(cell, i * LOOK_S, False, share, lambda d=demand: d))
    return out


def test_a_cell_that_wakes_for_a_moment_now_and_then_is_asleep() -> None:
    # 30 ms of work in every 250 (an eighth of a CPU): a busy look now and then does not keep it "computing".
    pattern = ([0.6] + [0.0] * 4) * 8
    assert any(_looks(pattern)[6:]), _looks(pattern)


def test_a_cell_that_computes_or_has_just_woken_is_not_asleep() -> None:
    assert not any(_looks([1.0] * 30))
    woke = _looks([0.0] * 20 + [1.0] * 10)
    assert any(woke[:20]) and not any(woke[20:]), woke  # asleep while it slept; not from its first busy look


def test_a_family_is_asleep_where_it_leaves_one_of_its_slots_unused() -> None:
    # A fork's copies are measured together: one computing a whole CPU does not keep its siblings' slots.
    one = [1.0] * 30
    assert not any(_looks(one, share=1)) and any(_looks(one, share=2))
    assert not any(_looks([1.0 + IDLE_RATE * 1.5] * 30, share=2))  # over one slot and a quarter: both used


class _Slot:
    """One of the pool's own workers, as a cell's slot."""

    def __init__(self, slot: int) -> None:
        self.slot, self.replaced, self.alive = slot, False, True


class _Lease:
    """A session's lease whose processes sleep; what it was told, in order."""

    def __init__(self) -> None:
        self.worker, self.told = object(), []

    def demand_s(self) -> float:
        return 0.0

    def pause(self, paused: bool) -> None:
        self.told.append("pause" if paused else "resume")


class _Meter:
    def started(self, *args: object, **kwargs: object) -> None: ...

    def ended(self, *args: object) -> None: ...


def _pool(slots: int) -> SessionSlots:
    """SessionSlots on ``slots`` plain slots: the turns' own code, no workers or lending."""

    class Pool(SessionSlots):
        async def _take(self, deadline: float | None, wait_s: float | None, client: str, cell: bool = False) -> Any:
            self._cell_waiters[id(asyncio.current_task())] = 0.0
            try:
                return await self._idle.get(client)
            finally:
                del self._cell_waiters[id(asyncio.current_task())]

        def _release(self, worker: Any) -> None:
            self._idle.put_nowait(worker)

        def _replace(self, worker: Any) -> None: ...

    pool = Pool()
    pool._idle, pool._waiters, pool._meter, pool._idle_ticks = FreeWorkers(), {}, _Meter(), 0  # type: ignore[assignment]
    pool.cpus = pool.size = slots
    for i in range(slots):
        pool._idle.put_nowait(_Slot(i))  # type: ignore[arg-type]
    return pool


def test_a_slot_lent_to_a_cell_whose_call_went_away_goes_back_to_its_lender() -> None:
    # The borrower's call is cancelled (its client left) after the slot was lent and before it took it: the slot
    # goes back to the paused lender, which is continued, not to the queue (where the lender would wait for good).
    async def main() -> None:
        pool = _pool(1)
        lender, borrower = _Lease(), _Lease()
        ends = asyncio.Event()

        async def cell(lease: _Lease, limit_s: float, until: asyncio.Event | None = None) -> None:
            async with pool.computing(lease, limit_s=limit_s):  # type: ignore[arg-type]
                if until is not None:
                    await until.wait()

        held = asyncio.create_task(cell(lender, 10, ends))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(cell(borrower, 1))
        await asyncio.sleep(0.01)
        now = 100.0
        while not pool.cells_paused:
            pool._turn_cells(now, 0.0)
            now += LOOK_S + 0.01
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert lender.told == ["pause", "resume"], lender.told
        ends.set()
        await asyncio.wait_for(held, 1)
        assert pool._idle.qsize() == 1  # and the slot is free again once it ended

    asyncio.run(main())


def test_no_cell_is_lent_a_slot_past_the_one_that_has_waited_longest_where_none_could_lend_to_it() -> None:
    # The cell that has waited longest fits no lender (its limit is longer than the sleepers' can cover): lending
    # to later cells would stretch the lenders' lives, which it waits for, so nothing is lent.
    async def main() -> None:
        pool = _pool(1)
        lender, first, later = _Lease(), _Lease(), _Lease()
        ends = asyncio.Event()

        async def cell(lease: _Lease, limit_s: float, until: asyncio.Event | None = None) -> None:
            async with pool.computing(lease, limit_s=limit_s):  # type: ignore[arg-type]
                if until is not None:
                    await until.wait()

        tasks = [asyncio.create_task(cell(lender, 2, ends))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(cell(first, 30)))  # 30 s x 3: past the 6 s the lender may stand paused
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(cell(later, 1)))  # would fit
        await asyncio.sleep(0.01)
        for i in range(40):
            pool._turn_cells(100.0 + i * (LOOK_S + 0.01), 0.0)
        assert pool.cells_paused == 0 and lender.told == []
        ends.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 1)

    asyncio.run(main())


def test_a_cell_that_may_not_be_paused_lends_its_slot_awake_to_one_cell_at_a_time() -> None:
    # A cell whose client waits no longer than its limit (NeMo-Skills') is never paused, yet asleep it holds no
    # slot that cells wait for: it lends the slot without a pause, to a cell of any limit, runs on without it, and
    # holds it again once that cell ends. It lends to one cell at a time, and the borrower lends to nobody.
    async def main() -> None:
        pool = _pool(1)
        lender, borrower, later = _Lease(), _Lease(), _Lease()
        ends = {lease: asyncio.Event() for lease in (lender, borrower, later)}

        async def cell(lease: _Lease, pausable: bool, limit_s: float) -> None:
            async with pool.computing(lease, pausable=pausable, limit_s=limit_s):  # type: ignore[arg-type]
                await ends[lease].wait()

        def turns(now: float) -> float:
            for _ in range(20):
                pool._turn_cells(now, 0.0)
                now += LOOK_S + 0.01
            return now

        held = asyncio.create_task(cell(lender, False, 10))
        await asyncio.sleep(0)
        tasks = [asyncio.create_task(cell(borrower, True, 60))]  # 60 s: past what any pause could cover
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(cell(later, False, 5)))
        await asyncio.sleep(0.01)
        now = turns(100.0)
        await asyncio.sleep(0.01)
        assert (pool.cells_lent_awake, pool.cells_paused, lender.told) == (1, 0, [])
        assert [r.lease for r in pool._running.values()] == [borrower] and not held.done()
        assert pool.cell_leases() == [borrower, lender]  # running on, it is measured still
        ends[borrower].set()  # the slot goes back to the lender, which lends it again, to the next cell
        await tasks[0]
        assert [r.lease for r in pool._running.values()] == [lender]
        turns(now)
        await asyncio.sleep(0.01)
        assert [r.lease for r in pool._running.values()] == [later] and pool.cells_lent_awake == 2
        ends[lender].set()  # it ends without its slot: the borrower keeps it, then it is free
        await held
        assert pool.cell_leases() == [later]
        ends[later].set()
        await asyncio.wait_for(tasks[1], 1)
        assert pool._idle.qsize() == 1 and lender.told == []

    asyncio.run(main())
