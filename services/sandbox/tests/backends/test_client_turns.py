"""The pool's free workers handed out in clients' turns (``backends/client_turns.py``): a worker that comes free
goes to the waiting client holding the fewest, then served longest ago, never to the oldest waiter overall."""

from __future__ import annotations

import asyncio

import pytest
from codegym_sandbox.backends.client_turns import FreeWorkers, TurnOrder


class _Worker:
    def __init__(self, slot: int) -> None:
        self.slot = slot


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def _order(workers: FreeWorkers[_Worker], arrivals: list[str], held: dict[str, list[_Worker]]) -> list[str]:
    """The order ``arrivals`` (clients, in the order they come, none free for them) are handed a worker, as the
    workers in ``held`` (client -> its workers) come free one at a time, each taker giving its own back at once."""
    order: list[str] = []

    async def one(client: str) -> None:
        worker = await workers.get(client)
        order.append(client)
        await asyncio.sleep(0)
        workers.put_nowait(worker)

    tasks = []
    for client in arrivals:
        tasks.append(asyncio.create_task(one(client)))
        await _settle()
    for mine in held.values():
        for worker in mine:
            workers.put_nowait(worker)
            await _settle()
    await asyncio.gather(*tasks)
    return order


def test_another_clients_first_run_goes_ahead_of_a_backlog() -> None:
    """A holds the only worker and has five more waiting when B comes: B is served next, not sixth."""

    async def main() -> list[str]:
        workers: FreeWorkers[_Worker] = FreeWorkers()
        workers.put_nowait(_Worker(0))
        first = await workers.get("A")
        return await _order(workers, ["A"] * 5 + ["B"], {"A": [first]})

    assert asyncio.run(main()) == ["B", "A", "A", "A", "A", "A"]


def test_waiting_clients_take_turns_and_the_one_holding_fewest_goes_first() -> None:
    async def main() -> tuple[list[str], list[str]]:
        workers: FreeWorkers[_Worker] = FreeWorkers()
        for i in range(4):
            workers.put_nowait(_Worker(i))
        a = [await workers.get("A") for _ in range(3)]
        c = await workers.get("C")
        # A holds three, C one: as A's come free, C's waiter goes first, though A waited longer and was served
        # longer ago.
        order = await _order(workers, ["A", "A", "C"], {"A": a})
        workers.put_nowait(c)
        one: FreeWorkers[_Worker] = FreeWorkers()  # one worker, held by D as the others come
        one.put_nowait(_Worker(0))
        d = await one.get("D")
        return order, await _order(one, ["A", "A", "A", "B", "B", "C"], {"D": [d]})

    fewest, rounds = asyncio.run(main())
    assert fewest == ["C", "A", "A"]
    assert rounds == ["A", "B", "C", "A", "B", "A"]


def test_a_worker_goes_to_the_next_client_in_turn_whose_waiter_it_fits() -> None:
    """A cell takes only the pool's own workers (slot 0 here): a lent one (slot 5) passes it over to a run of a
    client later in turn, and stays free where no waiter fits it; the own one comes to the cell in its turn."""

    async def main() -> list[tuple[str, int]]:
        workers: FreeWorkers[_Worker] = FreeWorkers()
        got: list[tuple[str, int]] = []

        async def one(client: str, own: bool) -> None:
            worker = await workers.get(client, (lambda w: w.slot == 0) if own else (lambda w: True))
            got.append((client, worker.slot))

        cell = asyncio.create_task(one("B", own=True))
        await _settle()
        workers.put_nowait(_Worker(5))
        await _settle()
        assert not got and workers.qsize() == 1  # no waiter it fits: it stays free
        run = asyncio.create_task(one("A", own=False))
        await _settle()
        workers.put_nowait(_Worker(0))
        await asyncio.gather(cell, run)
        return got

    assert asyncio.run(main()) == [("A", 5), ("B", 0)]


def test_a_waiter_cancelled_as_it_was_handed_a_worker_passes_it_on_and_nothing_is_left_held() -> None:
    async def main() -> FreeWorkers[_Worker]:
        workers: FreeWorkers[_Worker] = FreeWorkers()
        workers.put_nowait(_Worker(0))
        held = await workers.get("A")
        gone = asyncio.create_task(workers.get("B"))
        after = asyncio.create_task(workers.get("C"))
        await _settle()
        workers.put_nowait(held)  # B is next in turn and is handed it ...
        gone.cancel()  # ... in the same turn of the loop as its wait is cancelled
        with pytest.raises(asyncio.CancelledError):
            await gone
        worker = await asyncio.wait_for(after, 1)  # C has it
        workers.put_nowait(worker)
        waiting = asyncio.create_task(workers.get("D", lambda w: False))  # cancelled while it waits
        await _settle()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return workers

    workers = asyncio.run(main())
    assert workers.qsize() == 1 and not workers._holders and not workers._waiting
    assert not workers.turns._held and not workers.turns._served


def test_a_worker_handed_to_another_client_counts_as_that_clients() -> None:
    async def main() -> TurnOrder:
        workers: FreeWorkers[_Worker] = FreeWorkers()
        workers.put_nowait(_Worker(0))
        worker = await workers.get("A")
        workers.hand(worker, "B")  # a cell's slot lent to another client's cell
        assert workers.turns.held("A") == 0 and workers.turns.held("B") == 1
        workers.release(worker)
        return workers.turns

    turns = asyncio.run(main())
    assert turns.held("B") == 0 and not turns._served


def test_the_turn_order_is_fewest_held_then_served_longest_ago() -> None:
    order = TurnOrder()
    assert order.first(["A", "B"]) == "A"  # neither served: the first named
    order.granted("A")
    assert order.first(["A", "B"]) == "B"  # A holds one
    order.granted("B")
    order.gave_back("A", waits=True)
    order.gave_back("B", waits=True)
    assert order.first(["A", "B"]) == "A"  # both hold none: A was served longer ago


def test_the_server_itself_is_first_in_turn_even_beside_a_client_as_new() -> None:
    """What the server takes for itself (``""``: a session's memory) is never counted in a turn; beside a client
    that holds nothing and was never served, it was first only where it came first (round 56)."""
    turns = TurnOrder()
    assert turns.first(["new client", ""]) == ""
    assert turns.ordered(["new client", "", "other"]) == ["", "new client", "other"]
