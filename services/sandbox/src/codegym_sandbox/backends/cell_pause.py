"""The server's half of a cell's pause (``agent/cell_pause.py``): the frame, and the answer's deadline held.

A cell's answer is awaited for as long as the cell may run, with its credit for CPU waits; a paused cell's time
stands still, so while it stands paused its answer has no deadline, and once continued it has what was left."""

from __future__ import annotations

import asyncio
import contextlib

from ..agent.cell_pause import PAUSE, RESUME
from ..agent.protocol import encode_frame


def frame(paused: bool, member: int | None = None, held_s: float | None = None) -> bytes:
    """A ``pause`` or ``resume`` frame; a resume may say how long the server held the pause (``held_s``), the most the
    agent credits it (its walk that stops the processes may outlast a pause the server ended meanwhile)."""
    header: dict[str, object] = {"op": PAUSE if paused else RESUME}
    if member is not None:
        header["member"] = member
    if held_s is not None:
        header["held_s"] = held_s
    return encode_frame(header)


class AnswerDeadline:
    """The deadline of one exchange's answer, awaited in an ``asyncio.timeout`` scope (:meth:`scope`), held while
    its cell stands paused: a pause that comes before the scope (as the cell's frame is still being sent) holds
    it from its start."""

    def __init__(self, begun: bool = False) -> None:
        self._scope: asyncio.Timeout | None = None
        self._left: float | None = None  # what was left of it when paused
        self._paused = False
        self._begun = begun  # an exchange is on: a pause between exchanges is for no cell

    def begin(self) -> None:
        """An exchange begins: its frame is about to be sent."""
        self._scope, self._left, self._paused, self._begun = None, None, False, True

    def scope(self, seconds: float) -> asyncio.Timeout:
        if self._paused:
            self._scope, self._left = asyncio.timeout(None), seconds
        else:
            self._scope, self._left = asyncio.timeout(seconds), None
        return self._scope

    def done(self) -> None:
        """The exchange is over (answered or not): a pause or resume that comes later is for no cell."""
        self._scope, self._left, self._paused, self._begun = None, None, False, False

    def hold(self, paused: bool) -> None:
        """Hold the deadline (``paused``), or give it back what was left of it."""
        if not self._begun:
            return
        self._paused = paused
        scope = self._scope
        if scope is None or scope.expired():
            return
        loop = asyncio.get_running_loop()
        with contextlib.suppress(RuntimeError):  # a scope left meanwhile: nothing to hold
            if paused and self._left is None and (when := scope.when()) is not None:
                self._left = max(when - loop.time(), 0.0)
                scope.reschedule(None)
            elif not paused and self._left is not None:
                scope.reschedule(loop.time() + self._left)
                self._left = None
