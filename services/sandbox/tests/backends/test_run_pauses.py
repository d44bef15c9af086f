"""A run paused for the memory budget and for the CPUs goes on only once neither holds it; a paused run's memory is
still read (a call in flight as it stopped, a populating mmap, grows it after the pause)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, cast

import pytest
from codegym_sandbox.agent.cell_pause import CellPause
from codegym_sandbox.agent.protocol import encode_frame
from codegym_sandbox.backends.lending import DemandMeter
from codegym_sandbox.backends.memory import Lease, MemoryBudget
from codegym_sandbox.backends.memory_use import MemoryWatch
from codegym_sandbox.backends.run_pauses import RunPauses


class Worker:
    def __init__(self) -> None:
        self.frames: list[bool] = []

    def pause(self, paused: bool) -> None:
        self.frames.append(paused)


def test_a_run_paused_for_both_reasons_goes_on_only_once_neither_holds_it() -> None:
    pauses, worker = RunPauses(), Worker()
    w = cast(Any, worker)
    pauses.crowded(w)  # for the CPUs
    pauses.hold(w, "memory", True)
    assert worker.frames == [True]  # one pause frame
    assert pauses.go_on(0.0, 2, DemandMeter()) == 1.0  # the CPUs have room: lending lets it go ...
    assert worker.frames == [True]  # ... but the memory budget still holds it
    pauses.hold(w, "memory", False)
    assert worker.frames == [True, False]
    pauses.hold(w, "memory", True)
    pauses.ended(w)
    assert not pauses.stood and worker.frames == [True, False, True]


async def _two_runs(held: dict[int, int]) -> tuple[MemoryBudget, Lease, Lease, MemoryWatch]:
    """Two runs of 450 MiB admitted by their share of a 500 MiB budget, and a memory tick that reads their agents
    (1 and 2) holding ``held``."""
    budget = MemoryBudget(500)
    first, second = await budget.acquire(450, share_mb=64), await budget.acquire(450, share_mb=64)
    watch = MemoryWatch(lambda: budget)
    watch.use.mb = lambda agent: held[agent]  # type: ignore[method-assign]
    return budget, first, second, watch


def test_a_paused_runs_memory_is_still_read_and_charged() -> None:
    async def main() -> None:
        held = {1: 480, 2: 10}
        budget, grower, sleeper, watch = await _two_runs(held)
        paused: list[bool] = []
        watch.tick({grower: 1, sleeper: 2}, lambda _, p: paused.append(p))
        assert grower.paused and paused == [True]  # 480 + 64 > 500; no room for it grown to 450 beside the other
        held[1] = 490  # a populating mmap in flight as it stopped
        watch.tick({grower: 1, sleeper: 2}, lambda _, p: paused.append(p))
        assert grower.used_mb == 490 and budget.held_mb == 490 + 64, "a paused run's memory was not read again"

    asyncio.run(main())


def test_a_run_chosen_and_let_go_on_in_one_tick_is_never_paused() -> None:
    async def main() -> None:
        _, oldest, younger, watch = await _two_runs({1: 300, 2: 250})
        frames: list[tuple[int, bool]] = []
        watch.tick({oldest: 1, younger: 2}, lambda lease, p: frames.append((lease.order, p)))
        # Both grew past their share as 550 passed 500; none goes on, so the oldest does, whatever room there is:
        # it gets no pause (and its resume) in the same tick, which its agent would count as time stood still.
        assert frames == [(younger.order, True)] and watch.paused == 1
        assert oldest.full and not oldest.paused and younger.paused

    asyncio.run(main())


def test_a_run_paused_for_a_tenth_of_its_limit_goes_on_within_the_budgets_margin() -> None:
    async def main() -> None:
        budget = MemoryBudget(500)
        budget.machine_mb = 500 + 2 * 300  # a margin of 300 MiB beyond the budget: overcommit_mb
        leases = [await budget.acquire(300, share_mb=64) for _ in range(3)]
        for lease, held in zip(leases, (280, 200, 200), strict=True):
            lease.pause_bound_s = 0.2
            budget.update(lease, held)
        oldest, middle, youngest = leases
        assert budget.over(now=10.0) == leases  # 680 of 500: all grew past their share
        assert budget.resumable(0, now=10.0) == [oldest]  # none goes on: the oldest does, whatever room there is
        # Grown to its limit, the middle one would bring 800 to a budget of 500: not before its bound ...
        assert budget.resumable(1, now=10.1) == []
        # ... then within the margin (800 <= 500 + 300); the youngest, grown, would bring 900: it waits for room.
        assert budget.resumable(1, now=10.25) == [middle]
        assert middle.full and not middle.paused and youngest.paused and budget.held_mb == 800

    asyncio.run(main())


class _SlowToStop:
    """A run's box as a pause sees it: its walk that stops the processes takes 0.3 s (one in a long call)."""

    def stop(self) -> bool:
        time.sleep(0.3)
        return True

    def resume(self) -> None:
        pass


@pytest.mark.parametrize("held_s", [0.02, None])
def test_a_pause_is_credited_no_more_than_the_server_held_it(held_s: float | None) -> None:
    """The walk that stops a run counts as paused (its processes have their stops pending), but a pause the server
    ended within it is credited what the server held: one in a long call (a populating mmap) kept the walk going
    for a pause that lasted no time, and a sleep on the run's critical path ran on through it (round 53)."""
    pauses = CellPause(_SlowToStop())
    r, w = os.pipe()
    try:
        os.write(w, encode_frame({"op": "pause"}))
        resume: dict[str, object] = {"op": "resume"} if held_s is None else {"op": "resume", "held_s": held_s}
        os.write(w, encode_frame(resume))  # ended by the server as the walk went on
        assert pauses.take(r) is None and pauses.paused
        assert pauses.take(r) is None and not pauses.paused
    finally:
        os.close(r)
        os.close(w)
    if held_s is None:  # an old server's frame: the agent's own count, the walk included
        assert pauses.total_s >= 0.3
    else:
        assert pauses.total_s <= held_s + 0.05


def test_the_next_test_of_an_exchange_that_went_on_at_its_limit_is_admitted_by_its_share_again() -> None:
    async def main() -> None:
        budget = MemoryBudget(500)
        budget.machine_mb = 500 + 2 * 300
        exchange, whole = await budget.acquire(300, share_mb=64), await budget.acquire(100)
        budget.update(exchange, 450)
        assert budget.over(now=1.0) == [exchange]
        honest = asyncio.ensure_future(budget.acquire(100, share_mb=64))
        await asyncio.sleep(0.01)  # its wait, granted or not, has run
        assert not honest.done()  # nothing is admitted while a run stands paused
        budget.update(exchange, 250)
        assert budget.resumable(1, now=1.1) == [exchange] and exchange.full  # 300 + 100 fit: on, at its limit
        await asyncio.sleep(0.01)
        assert honest.done() and budget.held_mb == 300 + 100 + 64
        late = asyncio.ensure_future(budget.acquire(100, share_mb=64))
        await asyncio.sleep(0.01)
        assert not late.done()  # 464 + 64 > 500: it waits for the exchange's test ...
        budget.anew(exchange)  # ... whose next test starts: its share again, and what it holds is read anew
        await asyncio.sleep(0.01)
        assert late.done() and not exchange.full and budget.held_mb == 64 + 100 + 64 + 64
        budget.update(exchange, 350)  # the next test grows: charged what it holds, and paused as any other
        assert budget.over(now=2.0) == [exchange]
        budget.anew(exchange)  # a paused lease, and one admitted whole from the start, stay as they are
        budget.anew(whole)
        assert exchange.paused and exchange.charge_mb == 350 and whole.full and budget.held_mb == 350 + 100 + 128

    asyncio.run(main())
