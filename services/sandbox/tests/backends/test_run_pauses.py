"""A run paused for the memory budget and for the CPUs goes on only once neither holds it; a paused run's memory is
still read (a call in flight as it stopped, a populating mmap, grows it after the pause)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from codegym_sandbox.backends.lending import DemandMeter
from codegym_sandbox.backends.memory import MemoryBudget
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


def test_a_paused_runs_memory_is_still_read_and_charged() -> None:
    async def main() -> None:
        budget = MemoryBudget(500)
        grower, sleeper = await budget.acquire(450, share_mb=64), await budget.acquire(450, share_mb=64)
        watch = MemoryWatch(lambda: budget)
        held = {1: 480, 2: 10}
        watch.use.mb = lambda agent: held[agent]  # type: ignore[method-assign]
        paused: list[bool] = []
        watch.tick({grower: 1, sleeper: 2}, lambda _, p: paused.append(p))
        assert grower.paused and paused == [True]  # 480 + 64 > 500; no room for it grown to 450 beside the other
        held[1] = 490  # a populating mmap in flight as it stopped
        watch.tick({grower: 1, sleeper: 2}, lambda _, p: paused.append(p))
        assert grower.used_mb == 490 and budget.held_mb == 490 + 64, "a paused run's memory was not read again"

    asyncio.run(main())
