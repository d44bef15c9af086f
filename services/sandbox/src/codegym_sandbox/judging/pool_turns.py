"""Turns at the comparison pool's processes, client by client, by what each client's comparisons cost.

The pool (``off_loop``) has a few processes for every client's large comparisons. Handed to its executor as
they came, one client's backlog queued ahead of everyone else: a request of 16 programs that printed a MB of
numbers each made another client's comparison of 2,000 numbers wait 8 s instead of 0.02 s. Taken in turns one
comparison each, a client's ten small comparisons still waited for ten of another's large ones (12 s instead of
0.6 s). So comparisons wait here, each client's in a queue of its own, and a free place goes to the waiting client
that has used the least of the pool: each client has a clock of the characters its comparisons were given (what a
comparison costs the pool grows with them), a client that comes to the pool starts at the clock where the place
given last started (time away is not saved up), and among clocks alike, the one served longest ago (start-time
fair queuing). A client's small
comparisons then all go before another's next large one; its own large one waits its share. How many of one
client's comparisons wait at all is its run window's to bound (``off_loop.Comparisons``).

A place is taken for a slice of a comparison (``slices``), not the whole of it: a comparison's cost is the
program's to choose (8 MiB of ``1`` against ``1.0``, 5 s of a process), and taken whole, every other client's
comparison waited for the one in a process, whatever its turn. A client stays at the pool for the slices of a
comparison (:meth:`Turns.staying`), so its clock counts them all, as one comparison's. Among a client's own,
the oldest comparison's next slice goes first (a take's ``rank``): taken in the order they came, a client's
comparisons went on a slice each in turn and ended together, each holding its share of the memory budget until
the last (round 56: fifty 8 MB comparisons held every other client's runs out of the budget for minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Iterator


class Turns:
    """``size`` places, given to clients (any hashable name) in turn: :meth:`take` one, :meth:`give` it back. And
    ``spare`` places more, each for a client that holds none while every place is held by others: where a place
    is held for one call as long as its bound (an analysis: seconds, never sliced), a client's first waited for
    another's whole call, however its turn came (round 59: a client's honest pytest file waited 5-12 s a run
    behind another's rows, back to back); with a spare, it shares the CPUs with that call instead."""

    def __init__(self, size: int, spare: int = 0) -> None:
        self.size, self.spare = size, spare
        self.busy = 0  # places held
        self._held: dict[str, int] = {}  # client -> places it holds
        # client -> its takes waiting, a heap of (rank, serial, take): the oldest work's first, then the oldest take
        self._waiting: dict[str, list[tuple[int, int, asyncio.Future[None]]]] = {}
        # client -> when it last got a place; forgotten once it holds and waits for none, so this stays as small
        # as the clients at the pool now (a client that comes back is as new: it was served longest ago).
        self._served: dict[str, int] = {}
        self._serials = itertools.count()
        self._used: dict[str, int] = {}  # client -> its clock: characters given to the pool (see the module)
        self._now = 0  # the clock at which the last place given was taken: where a client coming to the pool starts
        self._cost: dict[asyncio.Future[None], int] = {}  # a waiting take -> what it costs
        self._staying: dict[str, int] = {}  # client -> its works of many places now (see staying)

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def take(self, client: str, cost: int = 1, rank: int = 0) -> None:
        """A place, in ``client``'s turn, for work of ``cost`` (characters compared); among the client's own
        waiting, the lowest ``rank`` first (its work's age: see the module), then the oldest take."""
        self._join(client)
        if (self.busy < self.size and not self._waiting) or self._spare_for(client):
            self._grant(client, cost)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting.setdefault(client, []), (rank, next(self._serials), granted))
        self._cost[granted] = cost
        try:
            await granted
        except BaseException:
            self._cost.pop(granted, None)
            if granted.done() and not granted.cancelled():
                self.give(client)  # granted as it was cancelled: the next in turn has it
            else:  # still in its queue, unless a turn came to it after it was cancelled (and passed it over)
                queue = self._waiting.get(client, [])
                kept = [entry for entry in queue if entry[2] is not granted]
                if len(kept) != len(queue):
                    heapq.heapify(kept)
                    self._waiting[client] = kept
                if not kept:
                    self._waiting.pop(client, None)
                self._forget(client)
            raise

    @contextlib.contextmanager
    def staying(self, client: str) -> Iterator[None]:
        """``client`` at the pool for work of many places, one after another (a comparison, a slice a place):
        its clock is kept between them, as while it holds or waits for one, so that what it used counts."""
        self._staying[client] = self._staying.get(client, 0) + 1
        try:
            yield
        finally:
            self._staying[client] -= 1
            if not self._staying[client]:
                del self._staying[client]
                self._forget(client)

    def give(self, client: str) -> None:
        """Give back a place ``client`` took: the next client in turn takes it."""
        self.busy -= 1
        self._held[client] -= 1
        if not self._held[client]:
            del self._held[client]
            self._forget(client)
        self._next()

    def _turn(self, client: str) -> tuple[int, int]:
        """Where ``client`` stands: the least used first, then the one served longest ago."""
        return self._used.get(client, 0), self._served.get(client, -1)

    def _spare_for(self, client: str) -> bool:
        """Whether ``client``, which holds no place, may take a spare one now."""
        return client not in self._held and self.size <= self.busy < self.size + self.spare

    def _next(self) -> None:
        while self._waiting:
            if self.busy < self.size:
                client = min(self._waiting, key=self._turn)
            elif holding_none := [c for c in self._waiting if self._spare_for(c)]:
                client = min(holding_none, key=self._turn)
            else:
                break
            queue = self._waiting[client]
            granted = heapq.heappop(queue)[2]
            if not queue:
                del self._waiting[client]
            cost = self._cost.pop(granted, 1)
            if granted.cancelled():  # its take is about to end: the place goes on to the next
                self._forget(client)
                continue
            self._grant(client, cost)
            granted.set_result(None)

    def _join(self, client: str) -> None:
        """A client that comes to the pool starts where the place given last started (none saves up time away)."""
        self._used[client] = max(self._used.get(client, 0), self._now)

    def _grant(self, client: str, cost: int) -> None:
        self.busy += 1
        self._held[client] = self._held.get(client, 0) + 1
        self._served[client] = next(self._serials)
        self._now = self._used.get(client, self._now)
        self._used[client] = self._now + max(cost, 1)

    def _forget(self, client: str) -> None:
        if client not in self._held and client not in self._waiting and client not in self._staying:
            self._served.pop(client, None)
            self._used.pop(client, None)
        if not self._used:
            return
        floor = min(min(self._used.values()), self._now)  # clocks kept small: only their differences matter
        if floor > 1 << 40:
            for c in self._used:
                self._used[c] -= floor
            self._now -= floor
