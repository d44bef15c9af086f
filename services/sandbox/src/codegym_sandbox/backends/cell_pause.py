"""The server's half of a cell's pause (``agent/cell_pause.py``): the frame, and the answer's deadline held.

A cell's answer is awaited for as long as the cell may run, with its credit for CPU waits; a paused cell's time
stands still, so while it stands paused its answer has no deadline, and once continued it has what was left."""

from __future__ import annotations

import asyncio

from ..agent.cell_pause import PAUSE, RESUME
from ..agent.protocol import encode_frame


def frame(paused: bool, member: int | None = None) -> bytes:
    header: dict[str, object] = {"op": PAUSE if paused else RESUME}
    if member is not None:
        header["member"] = member
    return encode_frame(header)


class AnswerDeadline:
    """The deadline of an answer awaited in ``asyncio.timeout`` scopes (:meth:`scope`), held while paused."""

    def __init__(self) -> None:
        self._scope: asyncio.Timeout | None = None
        self._left: float | None = None  # what was left of it when paused

    def scope(self, seconds: float) -> asyncio.Timeout:
        self._scope, self._left = asyncio.timeout(seconds), None
        return self._scope

    def done(self) -> None:
        """The answer came (or will not): the scope is left."""
        self._scope = self._left = None

    def hold(self, paused: bool) -> None:
        """Hold the deadline (``paused``), or give it back what was left of it."""
        scope = self._scope
        if scope is None or scope.expired():
            return
        loop = asyncio.get_running_loop()
        if paused and self._left is None and (when := scope.when()) is not None:
            self._left = max(when - loop.time(), 0.0)
            scope.reschedule(None)
        elif not paused and self._left is not None:
            scope.reschedule(loop.time() + self._left)
            self._left = None
