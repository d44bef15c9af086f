"""Many runs of one request at once, ended together: where one fails, none of the others runs on.

``asyncio.gather`` raises the first failure and leaves the other awaitables running: the runs of a request
already answered (a 503 for a queue that filled, a fault) would go on holding the queue and the workers, their
results dropped, while the next clients wait. Every fan-out of a request's runs goes through :func:`all_of`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def all_of(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Each result, in order; where one raises (or this is cancelled), the others are cancelled, and awaited to
    their end, before its exception goes on."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
