"""Whose turn it is, client by client, at the pool's workers (:class:`FreeWorkers`); the comparison pool's
processes take turns by what comparisons cost instead (``judging/pool_turns.py``).

Served as they came, one client's backlog stood ahead of everyone else: a request of sleeping programs held every
worker, and the rest of its client's window (``max_workers`` runs) waited ahead of another client's single run,
which was refused past its queue wait. So what comes free goes to the waiting client that holds the fewest now, and
among those to the one served longest ago (:class:`TurnOrder`): another client's first run waits for those already
on workers, at most one run of each other client per worker, never for a client's backlog. How many of one client's
runs wait at all is its window's to bound (``pool.WorkerPool.admit``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

W = TypeVar("W", bound=Hashable)


class TurnOrder:
    """What each client holds and when it was last served: the one rule of the turn (:meth:`first`)."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}  # client -> what it holds now
        # client -> when it last got something; forgotten once it holds and waits for nothing, so this stays as
        # small as the clients here now (a client that comes back is as new: it was served longest ago).
        self._served: dict[str, int] = {}
        self._serials = itertools.count()

    def held(self, client: str) -> int:
        return self._held.get(client, 0)

    def first(self, clients: Iterable[str]) -> str:
        """The client next in turn among ``clients`` (those waiting): the fewest held, then served longest ago; the
        server itself (``""``: what it takes for itself, never counted in a turn) before any."""
        return min(clients, key=self._key)

    def ordered(self, clients: Iterable[str]) -> list[str]:
        """``clients`` in turn, the next first (see :meth:`first`)."""
        return sorted(clients, key=self._key)

    def _key(self, client: str) -> tuple[int, int]:
        return (self._held.get(client, 0), self._served.get(client, -1)) if client else (-1, -1)

    def granted(self, client: str) -> None:
        self._held[client] = self._held.get(client, 0) + 1
        self._served[client] = next(self._serials)

    def gave_back(self, client: str, waits: bool) -> None:
        """``client`` holds one less; ``waits``: whether it still waits for one (else, holding none, forgotten)."""
        self._held[client] -= 1
        if not self._held[client]:
            del self._held[client]
        self.forget(client, waits)

    def forget(self, client: str, waits: bool) -> None:
        if not waits and client not in self._held:
            self._served.pop(client, None)


@dataclass(eq=False)
class _Wait(Generic[W]):
    fits: Callable[[W], bool]
    got: asyncio.Future[W] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class FreeWorkers(Generic[W]):
    """The pool's free workers, and the runs and cells waiting for one, each client's waiters in a queue of its
    own: a worker that comes free goes to the client next in turn (:class:`TurnOrder`) among those with a waiter
    it fits, to its oldest such waiter. A worker handed out is its taker's client's until :meth:`release` (or
    :meth:`put_nowait`); :meth:`hand` passes it to another (a cell's slot lent to another cell)."""

    def __init__(self) -> None:
        self._queue: deque[W] = deque()
        self._waiting: dict[str, deque[_Wait[W]]] = {}  # client -> its waiters, oldest first
        self._holders: dict[W, str] = {}  # worker handed out -> the client holding it
        self.turns = TurnOrder()

    def qsize(self) -> int:
        return len(self._queue)

    def empty(self) -> bool:
        return not self._queue

    def put_nowait(self, worker: W) -> None:
        """``worker`` is free: to the waiter next in turn that it fits, else to the queue."""
        self.release(worker)
        self._queue.append(worker)
        self._hand_out()

    def get_nowait(self) -> W:
        """The oldest free worker, taken off the queue by the pool itself (to park or replace), held by no one."""
        if not self._queue:
            raise asyncio.QueueEmpty
        return self._queue.popleft()

    def release(self, worker: W) -> None:
        """``worker``'s holder holds it no more (it is parked, replaced, or free again)."""
        client = self._holders.pop(worker, None)
        if client is not None:
            self.turns.gave_back(client, client in self._waiting)

    def hand(self, worker: W, client: str) -> None:
        """``worker`` is now ``client``'s (from whoever held it)."""
        self.release(worker)
        self._hold(worker, client)

    async def get(self, client: str, fits: Callable[[W], bool] = lambda _: True) -> W:
        """A free worker that ``fits``, in ``client``'s turn: at once where one is free (no waiter before it fits
        a free one, or it would hold it), else once one comes free and ``client`` is next in turn."""
        worker = next((w for w in self._queue if fits(w)), None)
        if worker is not None:
            self._queue.remove(worker)
            self._hold(worker, client)
            return worker
        wait = _Wait(fits)
        self._waiting.setdefault(client, deque()).append(wait)
        try:
            return await wait.got
        except BaseException:
            if wait.got.done() and not wait.got.cancelled():  # handed a worker as it was cancelled: the next has it
                worker = wait.got.result()
                self.release(worker)
                self._queue.appendleft(worker)
                self._hand_out()
            else:
                queue = self._waiting.get(client, deque())
                if wait in queue:
                    queue.remove(wait)
                if not queue:
                    self._waiting.pop(client, None)
                self.turns.forget(client, client in self._waiting)
            raise

    def _hold(self, worker: W, client: str) -> None:
        self._holders[worker] = client
        self.turns.granted(client)

    def _hand_out(self) -> None:
        for worker in list(self._queue):
            if not self._waiting:
                return
            takers = [c for c, queue in self._waiting.items() if any(_takes(w, worker) for w in queue)]
            if not takers:  # only for waiters it does not fit (a lent worker, and cells wait): it stays free
                continue
            client = self.turns.first(takers)
            queue = self._waiting[client]
            wait = next(w for w in queue if _takes(w, worker))
            queue.remove(wait)
            if not queue:
                del self._waiting[client]
            self._queue.remove(worker)
            self._hold(worker, client)
            wait.got.set_result(worker)


def _takes(wait: _Wait[W], worker: W) -> bool:
    # A wait cancelled is still in its queue until its task runs again (and takes it out): it takes nothing.
    return not wait.got.done() and wait.fits(worker)
