"""Many runs of one request at once, ended together: where one fails, none of the others runs on.

``asyncio.gather`` raises the first failure and leaves the other awaitables running: the runs of a request
already answered (a 503 for a queue that filled, a fault) would go on holding the queue and the workers, their
results dropped, while the next clients wait. Nor does a request's fan-out start all of its runs at once: each
run's first steps (its request built, its files encoded) run in the turn of the event loop that starts it, and a
request of 10,000 runs held every route for seconds. Every fan-out of a request's runs goes through
:func:`all_of`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")

# Awaitables of one fan-out started and not yet done: more than the pool takes at once (its window of an admitted
# request's runs is max_workers), few enough that their first steps are short in one turn of the event loop.
MOST = 256


async def all_of(awaitables: Iterable[Awaitable[T]], most: int = MOST) -> list[T]:
    """Each result, in order, at most ``most`` of them started and not done at once; where one raises (or this
    is cancelled), the others are cancelled, and awaited to their end, before its exception goes on."""
    source = iter(awaitables)
    tasks: list[asyncio.Future[T]] = []
    running: set[asyncio.Future[T]] = set()
    try:
        for awaitable in source:
            while len(running) >= most:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                running -= done
                for task in done:
                    task.result()  # a failure ends the fan-out now
            task = asyncio.ensure_future(awaitable)
            tasks.append(task)
            running.add(task)
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for left in source:  # never started: closed, so that none is reported as never awaited
            if inspect.iscoroutine(left):
                left.close()
        raise
