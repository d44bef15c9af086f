"""Turns at the comparison pool's processes, client by client.

The pool (``off_loop``) has a few processes for every client's large comparisons. Handed to its executor as
they came, one client's backlog queued ahead of everyone else: a request of 16 programs that printed a MB of
numbers each made another client's comparison of 2,000 numbers wait 8 s instead of 0.02 s. So comparisons wait
here, each client's in a queue of its own, and a place in the pool goes to the waiting client that holds the
fewest places now, and among those to the one served longest ago: another client's first comparison waits for
those already in the pool, never for a client's backlog. How many of one client's comparisons wait at all is
its run window's to bound (``off_loop.Comparisons``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque


class Turns:
    """``size`` places, given to clients (any hashable name) in turn: :meth:`take` one, :meth:`give` it back."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.busy = 0  # places held
        self._held: dict[str, int] = {}  # client -> places it holds
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}  # client -> its takes waiting, oldest first
        # client -> when it last got a place; forgotten once it holds and waits for none, so this stays as small
        # as the clients at the pool now (a client that comes back is as new: it was served longest ago).
        self._served: dict[str, int] = {}
        self._serials = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def take(self, client: str) -> None:
        """A place, in ``client``'s turn."""
        if self.busy < self.size and not self._waiting:
            self._grant(client)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(client, deque()).append(granted)
        try:
            await granted
        except BaseException:
            if granted.done() and not granted.cancelled():
                self.give(client)  # granted as it was cancelled: the next in turn has it
            else:  # still in its queue, unless a turn came to it after it was cancelled (and passed it over)
                queue = self._waiting.get(client, deque())
                if granted in queue:
                    queue.remove(granted)
                if not queue:
                    self._waiting.pop(client, None)
                self._forget(client)
            raise

    def give(self, client: str) -> None:
        """Give back a place ``client`` took: the next client in turn takes it."""
        self.busy -= 1
        self._held[client] -= 1
        if not self._held[client]:
            del self._held[client]
            self._forget(client)
        self._next()

    def _next(self) -> None:
        while self._waiting and self.busy < self.size:
            client = min(self._waiting, key=lambda c: (self._held.get(c, 0), self._served.get(c, -1)))
            queue = self._waiting[client]
            granted = queue.popleft()
            if not queue:
                del self._waiting[client]
            if granted.cancelled():  # its take is about to end: the place goes on to the next
                self._forget(client)
                continue
            self._grant(client)
            granted.set_result(None)

    def _grant(self, client: str) -> None:
        self.busy += 1
        self._held[client] = self._held.get(client, 0) + 1
        self._served[client] = next(self._serials)

    def _forget(self, client: str) -> None:
        if client not in self._held and client not in self._waiting:
            self._served.pop(client, None)
