"""Room for a session made or forked while ends are on their way: within the caps, what the backend has no room
for (``Saturated``) is held only by ends not yet done, and the call waits for them a while rather than being
refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..backends.base import Saturated

T = TypeVar("T")

ROOM_WAIT_S = 3.0  # the longest a session made or forked waits for the room ends give back (an end takes ~200 ms)
_ROOM_POLL_S = 0.05  # how often room is looked for where no end of the store's is awaited


async def with_room(make: Callable[[], Awaitable[T]], ending: set[asyncio.Task[None]]) -> T:
    """``make()``, tried again while the backend has no room, for :data:`ROOM_WAIT_S` at most: as each of
    ``ending`` (deleted sessions' ends: a worker's slot and memory come back once it has ended) completes, and
    every :data:`_ROOM_POLL_S` (a forked member's slot comes back once its agent has seen its processes gone,
    after its end was sent). ``make`` must do nothing before it raises ``Saturated``: it is called again."""
    deadline = time.monotonic() + ROOM_WAIT_S
    while True:
        try:
            return await make()
        except Saturated:
            if (left := deadline - time.monotonic()) <= 0:
                raise
        wait = min(left, _ROOM_POLL_S)
        if ending:
            await asyncio.wait(set(ending), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(wait)
