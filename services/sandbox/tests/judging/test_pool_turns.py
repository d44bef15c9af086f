"""The comparison pool's turns (``judging.pool_turns``), and the pool's comparisons taken in them
(``judging.off_loop``): one client's backlog is never ahead of another client's first comparison."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from codegym_sandbox.backends.base import RunPolicy
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.judging import off_loop
from codegym_sandbox.judging.pool_turns import Turns
from codegym_sandbox.judging.slices import Measure, Part
from codegym_sandbox.models import Comparison


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _served(turns: Turns, arrivals: list[str], first: str = "first") -> list[str]:
    """The order ``arrivals`` (client names, in the order they come) get a place, one at a time, while
    ``first`` holds the only place when they come."""
    order: list[str] = []

    async def one(client: str) -> None:
        await turns.take(client)
        order.append(client)
        await asyncio.sleep(0)
        turns.give(client)

    await turns.take(first)
    tasks = []
    for client in arrivals:
        tasks.append(asyncio.create_task(one(client)))
        await _settle()
    turns.give(first)
    await asyncio.gather(*tasks)
    return order


def test_another_clients_first_goes_ahead_of_a_backlog() -> None:
    """A has five waiting when B comes: B is served first, not sixth."""
    order = asyncio.run(_served(Turns(1), ["A"] * 5 + ["B"], first="A"))
    assert order == ["B", "A", "A", "A", "A", "A"]


def test_waiting_clients_take_turns() -> None:
    order = asyncio.run(_served(Turns(1), ["A", "A", "A", "B", "B", "C"]))
    assert order == ["A", "B", "C", "A", "B", "A"]


def test_turns_go_by_what_comparisons_cost_not_by_their_number() -> None:
    """A has large comparisons waiting when B comes with ten small ones: all of B's go before A's next large one,
    and then A's, with B's clock ahead by no more than it used."""

    async def scenario() -> list[str]:
        turns, order = Turns(1), []

        async def one(client: str, cost: int) -> None:
            await turns.take(client, cost)
            order.append(client)
            await asyncio.sleep(0)
            turns.give(client)

        await turns.take("A", 1_000_000)
        tasks = [asyncio.create_task(one("A", 1_000_000)) for _ in range(3)]
        await _settle()
        tasks += [asyncio.create_task(one("B", 8_000)) for _ in range(10)]
        await _settle()
        turns.give("A")
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["B"] * 10 + ["A"] * 3


def test_the_client_holding_the_fewest_places_goes_first() -> None:
    """With places of A in the pool, a place that comes free goes to B, which holds none, though A waited first."""

    async def scenario() -> list[str]:
        turns, order = Turns(2), []
        await turns.take("A")
        await turns.take("A")

        async def one(client: str) -> None:
            await turns.take(client)
            order.append(client)

        waiting = [asyncio.create_task(one("A"))]
        await _settle()
        waiting.append(asyncio.create_task(one("B")))
        await _settle()
        turns.give("A")  # A still holds one: B, which holds none, has this place
        await _settle()
        assert order == ["B"]
        turns.give("A")
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(scenario()) == ["B", "A"]


def test_a_cancelled_wait_gives_its_turn_on_and_nothing_is_kept() -> None:
    async def scenario() -> Turns:
        turns = Turns(1)
        await turns.take("A")
        gone = asyncio.create_task(turns.take("B"))
        after = asyncio.create_task(turns.take("C"))
        await _settle()
        gone.cancel()
        turns.give("A")  # in the same turn of the loop: B's wait is cancelled, not yet ended
        await after
        assert gone.cancelled() and turns.busy == 1
        turns.give("C")
        return turns

    turns = asyncio.run(scenario())
    assert turns.busy == 0 and turns.waiting == 0
    assert not turns._held and not turns._waiting and not turns._served


def test_a_client_staying_keeps_its_clock_between_its_places() -> None:
    """A comparison takes a place a slice: between two of A's slices, B's small comparisons go as far as A's
    clock, not one each (A's clock forgotten at each slice, A would take every other place)."""

    async def scenario() -> list[str]:
        turns, order = Turns(1), []

        async def one(client: str, cost: int) -> None:
            await turns.take(client, cost)
            order.append(client)
            await asyncio.sleep(0)
            turns.give(client)

        with turns.staying("A"):
            await turns.take("A", 1_000)
            waiting = [asyncio.create_task(one("B", 100)) for _ in range(5)]
            await _settle()
            turns.give("A")  # its slice done; its next one comes after
            await one("A", 1_000)
            await asyncio.gather(*waiting)
        assert not turns._used and not turns._served and not turns._staying
        return order

    assert asyncio.run(scenario()) == ["B"] * 5 + ["A"]


@pytest.fixture()
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool as one thread: one place."""
    monkeypatch.setattr(off_loop, "size", lambda: 1)
    executor = ThreadPoolExecutor(1)
    monkeypatch.setattr(off_loop, "pool", lambda: executor)


def test_a_comparison_waits_for_a_slice_of_another_not_the_whole(one_thread: None) -> None:
    """A's comparison of a quarter of a million numbers is in the pool's only process when B's small one comes:
    B's is answered first (taken whole, it waited for all of A's, whatever the turns), and both are right."""

    async def scenario() -> list[str]:
        done: list[str] = []

        async def compare(client: str, actual: str, expected: str) -> None:
            comparisons = off_loop.Comparisons(MemoryBudget(1024), RunPolicy(admitted=True, client=client))
            assert await comparisons.outputs_match(actual, expected, Comparison.FLOAT, 1e-6, 1e-6)
            done.append(client)

        large = asyncio.create_task(compare("A", "1 " * 250_000, "1.0 " * 250_000))
        while not off_loop.turns().busy:  # A's first slice in the pool
            await asyncio.sleep(0.001)
        await compare("B", "2.5 " * 2000, "2.50 " * 2000)
        await large
        places = off_loop.turns()
        assert places.busy == 0 and not places._used and not places._staying
        return done

    assert asyncio.run(scenario()) == ["B", "A"]


@pytest.fixture()
def one_process(one_thread: None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pool as one thread (one place), whose measure of an expected output records whose it is."""
    measured: list[str] = []
    lock = threading.Lock()

    def least(expected: Part, mode: Comparison) -> Measure:
        time.sleep(0.02)
        with lock:
            measured.append(expected.text[0])
        return Measure(1, 1, len(expected.text), short=False)

    monkeypatch.setattr(off_loop, "measure_slice", least)
    return measured


def test_expected_outputs_are_measured_in_their_clients_turns(one_process: list[str]) -> None:
    """Four large expected outputs of one client sent to the pool: another client's comes second, not fifth."""

    async def scenario() -> None:
        big = "1.0 " * off_loop.ON_LOOP_CHARS
        backlog = [asyncio.create_task(off_loop.least_output("a" + big, Comparison.FLOAT, "A")) for _ in range(4)]
        await _settle()
        await off_loop.least_output("b" + big, Comparison.FLOAT, "B")
        await asyncio.gather(*backlog)

    asyncio.run(scenario())
    assert one_process == ["a", "b", "a", "a", "a"]


def test_a_comparison_holds_a_place_of_its_clients_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """As its run did: of a client's outputs, as many as its window wait for the pool and hold a share of the
    memory budget, the others wait for a place (without one, every program whose run ended had one waiting)."""
    released = asyncio.Event()
    clients: list[str] = []

    async def slow(client: str, *args: Any) -> bool:
        clients.append(client)
        await released.wait()
        return True

    monkeypatch.setattr(off_loop, "_in_pool", slow)
    monkeypatch.setattr(off_loop, "size", lambda: 4)  # places enough at the pool: the window bounds them

    async def scenario() -> tuple[bool, int, int]:
        window, memory = asyncio.Semaphore(2), MemoryBudget(1024)
        comparisons = off_loop.Comparisons(memory, RunPolicy(admitted=True, window=window, client="192.0.2.1"))
        expected = "1.0 " * 4096
        matches = [
            asyncio.create_task(comparisons.outputs_match("1 " * 4096, expected, Comparison.FLOAT, 1e-6, 1e-6))
            for _ in range(5)
        ]
        await _settle()
        seen = window.locked(), memory.held_mb, len(clients)
        released.set()
        assert all(await asyncio.gather(*matches))
        assert not window.locked() and memory.held_mb == 0
        return seen

    assert asyncio.run(scenario()) == (True, 2, 2)  # two places, a MiB each; three wait for a place
    assert clients[:2] == ["192.0.2.1"] * 2  # in its client's turn


def test_a_cancelled_comparison_keeps_its_place_until_its_process_is_done(
    one_process: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its client went away, but the process computes on: the next comparison waits for it, not beside it in
    the executor's own queue."""
    go = threading.Event()

    def blocked(expected: Part, mode: Comparison) -> Measure:
        go.wait(10)
        one_process.append(expected.text[0])
        return Measure(1, 1, len(expected.text), short=False)

    monkeypatch.setattr(off_loop, "measure_slice", blocked)

    async def scenario() -> tuple[int, bool]:
        big = "1.0 " * off_loop.ON_LOOP_CHARS
        gone = asyncio.create_task(off_loop.least_output("a" + big, Comparison.FLOAT, "A"))
        await _settle()
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        after = asyncio.create_task(off_loop.least_output("b" + big, Comparison.FLOAT, "B"))
        await _settle()
        held = off_loop.turns().busy, after.done()
        go.set()
        await after
        return held

    assert asyncio.run(scenario()) == (1, False)
    assert one_process == ["a", "b"]


def test_a_clients_oldest_work_goes_first_among_its_own() -> None:
    """A client's comparisons wait at the pool a slice at a time: its oldest one's next slice goes before a younger
    one's, whichever waited first (in the order they came, every comparison of a backlog went on a slice each in
    turn, ended with the last, and held its share of the memory budget all that while: round 56)."""

    async def scenario() -> list[int]:
        turns, order = Turns(1), []

        async def one(rank: int) -> None:
            await turns.take("A", 1, rank)
            order.append(rank)
            await asyncio.sleep(0)
            turns.give("A")

        await turns.take("A")
        tasks = []
        for rank in (5, 1, 3):
            tasks.append(asyncio.create_task(one(rank)))
            await _settle()
        turns.give("A")
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [1, 3, 5]


def test_a_comparisons_share_of_the_budget_waits_in_its_clients_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 56: a comparison's share was the server's own, first of all that wait for the budget, so one client's
    outputs waiting for comparison took every share that came back, and another client's run waited minutes. Now
    a share that comes back goes to the client that holds the fewest."""
    ended: dict[int, asyncio.Event] = {}

    async def slow(client: str, actual: str, *args: Any) -> bool:
        await ended.setdefault(len(actual), asyncio.Event()).wait()
        return True

    monkeypatch.setattr(off_loop, "_in_pool", slow)

    async def scenario() -> list[str]:
        memory, granted = MemoryBudget(3), []
        comparisons = off_loop.Comparisons(memory, RunPolicy(admitted=True, client="192.0.2.1"))
        expected = "1.0 " * 4096
        # Five outputs of A's, a MiB each: three hold the budget, two wait for it.
        matches = [
            asyncio.create_task(comparisons.outputs_match("1 " * 4096 + " " * i, expected, Comparison.FLOAT, 0, 0))
            for i in range(5)
        ]
        await _settle()
        assert memory.held_mb == 3 and memory.waiting == 2

        async def run() -> None:
            lease = await memory.acquire(1, client="192.0.2.2")
            granted.append("B")
            memory.release(lease)

        b = asyncio.create_task(run())
        await _settle()
        ended.setdefault(8192, asyncio.Event()).set()  # A's first comparison ends: its share is B's turn
        await _settle()
        granted.append(f"A waiting: {memory.waiting}")
        for i in range(1, 5):
            ended.setdefault(8192 + i, asyncio.Event()).set()
        await asyncio.gather(b, *matches)
        return granted

    assert asyncio.run(scenario()) == ["B", "A waiting: 1"]


def test_a_parse_in_its_pool_keeps_no_comparison_waiting(one_thread: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 57: a request's text parsed in the comparisons' only process (one call of a second or two, never
    sliced) made each slice of another client's comparison wait for it: a 0.1 s comparison took 18 s beside one
    client's 256 KiB pytest files. Parses have a pool and turns of their own."""
    release = threading.Event()
    parsing = ThreadPoolExecutor(1)
    monkeypatch.setattr(off_loop, "analysis_pool", lambda: parsing)

    def parse(text: str) -> int:
        release.wait(10)
        return len(text)

    async def scenario() -> None:
        memory = MemoryBudget(1024)
        held = asyncio.create_task(off_loop.analysed(memory, "A", parse, "x" * (2 * off_loop.ON_LOOP_CHARS)))
        while not off_loop.analysis_turns().busy:
            await asyncio.sleep(0.001)
        comparisons = off_loop.Comparisons(memory, RunPolicy(admitted=True, client="B"))
        assert await asyncio.wait_for(comparisons.outputs_match("1 " * 5000, "1.0 " * 5000, Comparison.FLOAT, 0, 0), 5)
        assert not held.done()
        release.set()
        assert await held == 2 * off_loop.ON_LOOP_CHARS

    asyncio.run(scenario())


def test_a_client_that_holds_no_place_takes_a_spare_one() -> None:
    """Round 59: a place of the analysis pool is held for one call as long as its bound (seconds), so a client's
    first waited for another's whole call, whatever its turn: its honest pytest file waited 5-12 s a run. A client
    that holds none takes a spare place; one that holds a place waits its turn, as before."""

    async def scenario() -> list[str]:
        turns, got = Turns(1, spare=1), []
        await turns.take("A")  # A holds the one place, and wants more

        async def take(client: str) -> None:
            await turns.take(client)
            got.append(client)

        more_a = asyncio.create_task(take("A"))
        await asyncio.sleep(0)
        b = asyncio.create_task(take("B"))  # holds none: the spare, now
        await asyncio.sleep(0)
        c = asyncio.create_task(take("C"))  # holds none, but the spare is B's: waits its turn
        await asyncio.sleep(0)
        got.append(f"busy {turns.busy}")
        turns.give("B")  # the spare back: C holds none, it takes it, ahead of A's second
        await asyncio.sleep(0)
        turns.give("A")  # the place: A's second
        await asyncio.gather(more_a, b, c)
        return got

    assert asyncio.run(scenario()) == ["B", "busy 2", "C", "A"]
