"""Turns of the event loop given back during long stretches of work that wait for nothing.

A coroutine that never suspends holds every other client's requests until it ends: a body of 262,000 tests
validated whole held them 0.8 s (round 58), and a request of 262,144 tests whose runs were all cached was keyed and
judged in one stretch, 10 s (round 60). Such work counts what it has done on a :class:`Turns`, which gives the loop
back every ``TURN`` items, however the work is cut (slices of a body, exchanges of a program's tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")

# The most items (tests validated, keyed or judged) done before others' requests get a turn.
TURN = 512


class Turns:
    """The items done since the loop last served others; a turn given back every ``TURN``. One may be shared by the
    tasks of a request that run side by side: once ``TURN`` items of all of them are done, each gives a turn back
    as it next counts, until the loop has served what was waiting (``_served``, run after it), so that others'
    requests get theirs after ``TURN`` items of the request, not of each of its tasks."""

    def __init__(self) -> None:
        self.since, self.due = 0, False

    async def done(self, items: int = 1) -> None:
        self.since += items
        if self.since >= TURN and not self.due:
            self.due = True
            asyncio.get_running_loop().call_soon(self._served)  # after all that is ready now, others' work among it
        if self.due:
            await asyncio.sleep(0)

    def _served(self) -> None:
        self.since, self.due = 0, False


async def mapped(fn: Callable[[T], U], items: Sequence[T], turns: Turns) -> list[U]:
    """``fn`` of each item, in slices of ``TURN``, a turn counted on ``turns`` for each."""
    out: list[U] = []
    for start in range(0, len(items), TURN):
        part = items[start : start + TURN]
        out += map(fn, part)
        await turns.done(len(part))
    return out
