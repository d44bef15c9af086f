"""What a cell's caller waits for, and what that decides of the cell: whether it may lend its slot while it
sleeps, whether its limit moves on by its waits for a CPU, and how long it may run.

codegym's own client waits for as long as a cell may take: its limit, stretched by its credit for CPU waits
(``agent/cell_clock.py``) and by its share of pauses while its slot is lent to cells that wait
(``backends/cell_turns.py``): ``client/_core.judging_s``. A client that waits a known time and no longer
(NeMo-Skills': its HTTP timeout is the cell's ``timeout``) gives up past it and drops the call, and a cell's
call dropped ends its session, state and all. So a cell whose caller says when it stops waiting
(``answer_by``) is answered before then, whatever other clients' cells wait: it never stands paused (asleep,
it lends its slot awake: ``backends/cell_turns.py``), gets no credit for CPU waits, and is interrupted
``ANSWER_MARGIN_S`` before its caller stops waiting (what the call waited for its session and a slot counted),
which keeps its session: its answer is a time-out. One whose time ran out while it waited for a slot is not run
at all: a time-out too, answered then, its session as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from .wire import CellResult

# How long before its caller stops waiting a cell is interrupted: the interrupt and the answer's way back.
ANSWER_MARGIN_S = 0.25


@dataclass(frozen=True)
class CellTerms:
    limit_s: float  # the cell's time limit, within the server's maximum
    answer_by: float | None = None  # when its caller stops waiting (monotonic); None: for as long as it may take

    @property
    def waits_for_it(self) -> bool:
        """Whether its caller waits for as long as the cell may take: then it may stand paused while it lends its
        slot, and its limit moves on by its waits for a CPU."""
        return self.answer_by is None

    def wall_s(self, now: float) -> float:
        """The wall time the cell may run from ``now`` on; 0: none is left, and it is not run."""
        if self.answer_by is None:
            return self.limit_s
        return max(min(self.limit_s, self.answer_by - ANSWER_MARGIN_S - now), 0.0)

    @contextlib.asynccontextmanager
    async def held(self, slot: AbstractAsyncContextManager[None]) -> AsyncIterator[float]:
        """Hold ``slot`` (the pool's, ``computing``) for the cell: the wall time it may run once it has it; 0 where
        its caller's time ran out while it waited for it (then it is not held)."""
        waits_s = None if self.answer_by is None else self.answer_by - ANSWER_MARGIN_S - time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            scope = asyncio.timeout(waits_s)
            try:
                async with scope:  # cancelled, a wait for a slot gives back what it took, as when its call goes away
                    await stack.enter_async_context(slot)
            except TimeoutError:
                if not scope.expired():
                    raise
            yield 0.0 if scope.expired() else self.wall_s(time.monotonic())

    def message(self, code: str, stdin: str | None, output_bytes: int, wall_s: float) -> bytes:
        """The cell's message to its kernel (``kernel.message``), as the agent reads it (``session.Kernel.cell``)."""
        job = {"source": code, "cell_timeout": wall_s, "output_bytes": output_bytes, "stdin": stdin,
               "wait_credit": self.waits_for_it}  # fmt: skip
        body = json.dumps(job).encode()
        return b"%d\n" % len(body) + body

    @staticmethod
    def unrun() -> CellResult:
        """The answer of a cell whose caller's time ran out before it could run: a time-out, its session kept."""
        return CellResult(stdout="", stderr="", display=None, error=None, status="time_limit", execution_time=0.0,
                          cpu_time=None, output_truncated=False, alive=True)  # fmt: skip
