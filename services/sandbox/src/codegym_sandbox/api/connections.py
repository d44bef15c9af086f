"""The connections ``codegym-sandbox serve`` accepts: each sends its request head in time, and few wait for one.

Until its head (request line and headers) is complete, a connection reaches no route: neither the token nor
the per-client limit of ``guard.py`` can refuse it. A client that opens connections and sends half a header on
each (slowloris) would hold them, each a file descriptor, until the server could accept no one, ``/readyz``
included. So uvicorn's HTTP protocol is given three bounds here:

- a deadline: a connection's head must be complete within ``header_timeout_s`` of the connection (or, on a
  kept-alive connection, of the head's first byte); else the connection is closed;
- a size: a head that grows past ``MAX_HEAD_BYTES`` unfinished is answered 431 and closed;
- a number: at most ``max_waiting`` connections may be waiting for a head (new ones, and kept-alive ones
  between requests); past it, the one that has waited longest is closed. An honest client sends its head
  within milliseconds of connecting, so the connections that have waited longest are the slow ones; a
  connection younger than ``GRACE_S`` is kept (its head may not even have been read yet, when a burst of
  connections arrives at once) unless the waiting number reaches four times the bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 << 10
GRACE_S = 0.5
_TOO_LARGE = b"request head larger than 64 KiB"
_CLOSE_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_TOO_LARGE), _TOO_LARGE)
)


class Waiting:
    """The connections of one server that wait for a request head, the longest-waiting first."""

    def __init__(self, timeout_s: float, max_waiting: int, on_drop: Callable[[str], None]) -> None:
        self.timeout_s = timeout_s
        self.max_waiting = max_waiting
        self.on_drop = on_drop  # told why each dropped connection was dropped: deadline, crowded, head_too_large
        self.since: dict[HeadBoundedProtocol, float] = {}  # insertion order: the longest-waiting first

    def wait(self, conn: HeadBoundedProtocol) -> None:
        self.since.pop(conn, None)
        self.since[conn] = time.monotonic()
        excess = len(self.since) - self.max_waiting
        if excess <= 0:
            return
        young = time.monotonic() - GRACE_S
        for oldest, since in list(self.since.items())[:excess]:
            if since > young and len(self.since) < 4 * self.max_waiting:
                break
            self.drop(oldest, "crowded")

    def done(self, conn: HeadBoundedProtocol) -> None:
        self.since.pop(conn, None)
        conn.disarm()

    def drop(self, conn: HeadBoundedProtocol, why: str, answer: bytes = b"") -> None:
        self.done(conn)
        if not conn.transport.is_closing():
            if answer:
                conn.transport.write(answer)
            conn.transport.close()
            self.on_drop(why)


class HeadBoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the bounds of this module. :func:`protocol_class` makes one per server."""

    waiting: ClassVar[Waiting]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline: asyncio.TimerHandle | None = None
        self.head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting.wait(self)
        self.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.done(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        in_head = self in self.waiting.since
        if in_head:
            self.arm()  # a kept-alive connection's next head begins: its deadline runs from now
            self.head_bytes += len(data)
        super().data_received(data)
        # Counted in whole chunks, so checked only while the head is still unfinished: every byte so far is head.
        if in_head and self in self.waiting.since and self.head_bytes > MAX_HEAD_BYTES:
            self.waiting.drop(self, "head_too_large", _CLOSE_431)

    def on_headers_complete(self) -> None:
        self.waiting.done(self)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Idle between requests (a pipelined request, if any, has started: it is the latest cycle).
        if not self.transport.is_closing() and self.cycle.response_complete:
            self.waiting.wait(self)

    def arm(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.waiting.timeout_s, self.waiting.drop, self, "deadline")

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.head_bytes = 0


def protocol_class(
    timeout_s: float, max_waiting: int, on_drop: Callable[[str], None] = lambda _: None
) -> type[HeadBoundedProtocol]:
    """A protocol class for ``uvicorn.run(http=...)``: the bounds above, shared by the connections of one server."""

    class Protocol(HeadBoundedProtocol):
        waiting = Waiting(timeout_s, max_waiting, on_drop)

    return Protocol
