"""What the server's own work on a request's text may take of its analysis pool: the kernel's bounds, not the
text's length (round 58: a 1 KB pytest file of nested ``finally`` blocks compiled for 15 s and took 3 GB, on the
event loop; one of 4 KB held the pool minutes; 64 ``/submit`` calls left 5.6 GB in its process)."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from collections.abc import Iterator

import pytest
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.judging import off_loop
from codegym_sandbox.models import Comparison

LONG = "x" * (2 * off_loop.ON_LOOP_CHARS)


def spin(text: str) -> int:
    while True:
        pass


def hog(text: str) -> int:
    return len(bytearray(1 << 30))


def core_limit(text: str) -> int:
    return resource.getrlimit(resource.RLIMIT_CORE)[1]


def slow(text: str) -> int:
    time.sleep(1.5)
    return len(text)


@pytest.fixture(autouse=True)
def fresh_pool() -> Iterator[None]:
    off_loop.shutdown()
    yield
    off_loop.shutdown()


def test_an_analysis_past_its_cpu_time_is_too_costly_and_the_pool_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(off_loop, "ANALYSIS_CPU_S", 1)

    async def scenario() -> None:
        memory = MemoryBudget(4096)
        with pytest.raises(off_loop.TooCostly):
            await off_loop.analysed(memory, "A", spin, LONG)
        assert memory.held_mb == 0
        assert await off_loop.analysed(memory, "B", len, LONG) == len(LONG)

    asyncio.run(scenario())


def test_a_process_ended_past_its_cpu_time_writes_no_core() -> None:
    async def scenario() -> int:
        return await off_loop.analysed(MemoryBudget(4096), "A", core_limit, LONG)

    assert asyncio.run(scenario()) == 0


def test_an_analysis_past_its_memory_is_too_costly() -> None:
    async def scenario() -> None:
        memory = MemoryBudget(4096)
        with pytest.raises(off_loop.TooCostly):
            await off_loop.analysed(memory, "A", hog, LONG, held_mb=64)
        assert await off_loop.analysed(memory, "A", len, LONG) == len(LONG)

    asyncio.run(scenario())


def test_what_is_not_linear_in_its_text_is_never_worked_on_on_the_loop() -> None:
    async def scenario() -> None:
        assert await off_loop.analysed(MemoryBudget(4096), "A", len, "x", linear=False) == 1

    asyncio.run(scenario())
    assert off_loop._analysing.started


def test_a_process_that_kept_much_is_ended_after_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(off_loop, "RECYCLE_KB", 0)

    async def scenario() -> None:
        assert await off_loop.analysed(MemoryBudget(4096), "A", len, LONG) == len(LONG)

    asyncio.run(scenario())
    assert not off_loop._analysing.started  # a fresh one for the next call


def test_an_analysis_waiting_for_its_place_holds_no_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 58: the charge was taken before the wait for a place at the pool: one client's requests waiting there
    held the whole budget, and every other client's runs waited for it."""

    async def scenario() -> None:
        memory = MemoryBudget(4096)
        first = asyncio.create_task(off_loop.analysed(memory, "A", slow, LONG, held_mb=100))
        while memory.held_mb != 100:
            await asyncio.sleep(0.01)
        waiting = [asyncio.create_task(off_loop.analysed(memory, "A", len, LONG, held_mb=1000)) for _ in range(3)]
        await asyncio.sleep(0.3)
        assert memory.held_mb == 100 and not first.done()
        assert await first == len(LONG) and await asyncio.gather(*waiting) == [len(LONG)] * 3

    monkeypatch.setattr(off_loop, "size", lambda: 1)  # one place, as on a machine of fewer than 8 CPUs
    asyncio.run(scenario())


def test_a_process_ended_past_its_bound_fails_its_own_call_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """One executor of all the pool's processes broke every call in flight when one of them died: another client's
    analysis, a right program's, failed with the call it never made. Each place has a process of its own."""
    monkeypatch.setattr(off_loop, "ANALYSIS_CPU_S", 1)
    monkeypatch.setattr(off_loop, "size", lambda: 2)

    async def scenario() -> None:
        memory = MemoryBudget(4096)
        other = asyncio.create_task(off_loop.analysed(memory, "B", slow, LONG))
        with pytest.raises(off_loop.TooCostly):
            await off_loop.analysed(memory, "A", spin, LONG)
        assert await other == len(LONG)

    asyncio.run(scenario())


def test_a_comparison_whose_process_was_killed_from_outside_is_made_again() -> None:
    async def scenario() -> None:
        async with off_loop._place("A", 1, 0) as place:
            pid = await place.call(os.getpid)
        os.kill(pid, signal.SIGKILL)  # its process, idle for the next place, killed from outside
        await asyncio.sleep(0.2)
        comparisons = off_loop.Comparisons(MemoryBudget(4096))
        assert await comparisons.outputs_match("1 " * 5000, "1.0 " * 5000, Comparison.FLOAT, 0, 0)

    asyncio.run(scenario())


def test_an_analysis_whose_idle_process_was_killed_is_made_in_a_fresh_one() -> None:
    """An analysis is not tried again where its process died as it ran (its own bound ended it); one that died idle,
    before the call, is no call's: the next analysis is made in a fresh process, never refused for it."""

    async def scenario() -> None:
        memory = MemoryBudget(4096)
        pid = await off_loop.analysed(memory, "A", pid_of, LONG)
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        assert await off_loop.analysed(memory, "B", len, LONG) == len(LONG)

    asyncio.run(scenario())


def pid_of(text: str) -> int:
    return os.getpid()
