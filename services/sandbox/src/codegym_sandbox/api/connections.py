"""The connections ``codegym-sandbox serve`` accepts: each sends its request head in time, and few wait for one.

Until its head (request line and headers) is complete, a connection reaches no route: neither the token nor
the per-client limit of ``guard.py`` can refuse it. A client that opens connections and sends half a header on
each (slowloris) would hold them, each a file descriptor, until the server could accept no one, ``/readyz``
included. So uvicorn's HTTP protocol is given three bounds here:

- a deadline: a connection's head must be complete within ``header_timeout_s`` of the connection (or, on a
  kept-alive connection, of the head's first byte); else the connection is closed;
- a size: a head that grows past ``MAX_HEAD_BYTES`` unfinished is answered 431 and closed;
- one request at a time: a request head that comes before the answer to the one before it (HTTP/1.1
  pipelining, which no client of this API uses) ends the connection after that answer, and nothing more is
  read from it. uvicorn would parse every request of a read at once, each into a request held in its
  queue, before any bound of the server saw it, and read on after each answer; and the next head, or a
  chunked body's trailers, would be read while a request is served, outside the head's bounds;
- a number: at most ``max_waiting`` connections may be waiting for a head (new ones, and kept-alive ones
  between requests); past it, the one that has waited longest is closed. An honest client sends its head
  within milliseconds of connecting, so the connections that have waited longest are the slow ones; a
  connection younger than ``GRACE_S`` is kept (its head may not even have been read yet, when a burst of
  connections arrives at once) unless the waiting number reaches four times the bound.

A head once in, the connection holds memory of the server's in two more ways, bounded here too:

- its body: it must arrive at ``min_body_rate`` bytes a second on average (within ``header_timeout_s`` plus its
  length at that rate, from the head's end); else the connection is aborted. A body one byte short would
  otherwise hold what came of it for as long as the client kept the socket (``guard.py`` bounds the bytes of
  bodies held at once). What a body sends that is not the body's bytes (a chunked body's framing and its
  trailers, which the parser joins like a head) counts as a head: at most ``MAX_HEAD_BYTES`` of it in a row.
  A body answered before it ended (``guard.py``'s 413 on its length, a 429) is read to its end and dropped,
  as the wait for the next head (its deadline, and ``max_waiting``): a client sends a whole body before it
  reads, and a connection closed under it lost the answer (a client that splits what is refused for its size
  could not tell it from a sandbox that failed);
- its answers that the client does not read: an answer is written whole into the connection's buffer, and a
  client that never reads would have the server hold it (an 8 MiB output is up to 48 MiB of JSON) for as long as
  it keeps the socket, past the request's end, where nothing else counts it, and the kernel's send queue a part
  of it. A connection whose answer is left unsent past the transport's high-water mark (in its buffer and the
  socket's queue together: ``unsent.py``) must have its client take some of it every ``send_stall_s``; and such
  answers hold at most ``max_unsent`` bytes once their clients have had a second to read (half as much again
  while new ones wait for that second): past it, the answer its client would take longest to take at the rate
  it has shown gives way, a new one never before a judged one (``Unsent.first_to_go``). Reset, not closed: a
  close, or a plain abort, leaves the queue to the kernel until it is sent. And a connection closed with any of
  its answer in the socket's queue (after its last answer, at the keep-alive timeout, on an error) is kept, not
  left to the kernel: it waits among the connections that wait (``max_waiting``), its answer watched from its
  first byte, until its client has taken it all (then it is closed) or it is reset.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .unsent import TRACKED, Kept, Unsent, bound_socket, keep_socket, kernel_queue, kernel_taken, reset_connection

MAX_HEAD_BYTES = 64 << 10
GRACE_S = 0.5
_TOO_LARGE = b"request head larger than 64 KiB"
_CLOSE_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_TOO_LARGE), _TOO_LARGE)
)


class _Pipelined(Exception):
    """Raised in the parser's callback to stop the parse at a pipelined request's first byte."""


class Waiting:
    """The connections of one server that wait for a request head, the longest-waiting first."""

    def __init__(self, timeout_s: float, max_waiting: int, on_drop: Callable[[str], None]) -> None:
        self.timeout_s = timeout_s
        self.max_waiting = max_waiting
        self.on_drop = on_drop  # told why each dropped connection was dropped (metrics.py names the reasons)
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
        if conn.kept is not None:
            conn.reset()
        elif conn.transport.is_closing():
            return
        elif conn.unsent():  # an answer its client has not taken: reset, or the kernel would keep it
            conn.reset()
        else:
            if answer:
                conn.transport.write(answer)
            conn.transport.close()
        self.on_drop(why)


class HeadBoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the bounds of this module. :func:`protocol_class` makes one per server."""

    waiting: ClassVar[Waiting]
    unsent_answers: ClassVar[Unsent]
    min_body_rate: ClassVar[float]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline: asyncio.TimerHandle | None = None
        self.head_bytes = 0
        self.body: tuple[float, int, int] | None = None  # a body being read: since, its length (or 0), bytes so far
        self.body_deadline: asyncio.TimerHandle | None = None
        self.parsed = 0  # the parser's steps past head-like bytes: a head's end, body bytes, a chunk's, a message's end
        self.unparsed = 0  # bytes read since the last such step, while a request is in
        self.refused = False  # a pipelined request came: nothing more is read
        self.draining = False  # the rest of a body whose request was answered: read to its end and dropped
        self.was_reset = False  # its socket's queue is freed: nothing to keep
        self.kept: Kept | None = None  # closed with an answer in the kernel's queue: kept until taken

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        bound_socket(transport.get_extra_info("socket"), self.unsent_answers.stall_s)
        self.waiting.wait(self)
        self.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.body_done()
        if exc is None and not self.was_reset and self.keep():
            super().connection_lost(exc)
            if self.kept is not None:  # not dropped at once by a bound: the server's shutdown sees it
                self.connections.add(self)
            return
        self.waiting.done(self)
        self.unsent_answers.release(self)
        super().connection_lost(exc)

    def keep(self) -> bool:
        """Closed (by the end of its last answer, the keep-alive timeout, an error, the client's end), a connection
        whose answer is still in the kernel's queue is kept: closed with it, its socket would stay in the kernel
        for as long as its client kept its window shut, counted by no one. Kept, it waits for its client among
        the connections that wait (``Waiting``), and its answer is watched from its first byte (``Unsent``),
        until its client has taken it all (then it is closed) or it is reset."""
        sock = keep_socket(self.transport.get_extra_info("socket"))
        if sock is None:
            return False
        self.kept = Kept(sock, self.loop, self.let_go)
        self.waiting.wait(self)
        self.unsent_answers.hold(self)
        return True

    def let_go(self) -> None:
        """Forgets a kept connection, taken or reset."""
        self.kept = None
        self.connections.discard(self)
        self.waiting.done(self)
        self.unsent_answers.release(self)

    def pause_writing(self) -> None:
        super().pause_writing()
        self.unsent_answers.hold(self)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.unsent() <= self.unwatched():  # else the kernel holds much of it still: it stays watched
            self.unsent_answers.release(self)

    def shutdown(self) -> None:
        """The server exits: a kept connection is closed, its rest left to the kernel, which ends it if its client
        takes none of it for twice the stall (``bound_socket``), as it would have at the server's exit."""
        if self.kept is not None:
            self.kept.close(reset=False)
            self.let_go()
            return
        super().shutdown()

    def unsent(self) -> int:
        """Bytes of answers its client has not taken: in the transport's buffer and in the socket's queue."""
        if self.kept is not None:
            return kernel_queue(self.kept.sock)
        if self.transport is None:
            return 0
        return self.transport.get_write_buffer_size() + kernel_queue(self.transport.get_extra_info("socket"))

    def unwatched(self) -> int:
        """Bytes it may leave unsent without being watched: an open connection's rest is at most the
        transport's high-water mark; a kept one has no rest but its queue."""
        return 0 if self.kept is not None else TRACKED

    def taken(self) -> int:
        if self.kept is not None:
            return kernel_taken(self.kept.sock)
        return kernel_taken(self.transport.get_extra_info("socket")) if self.transport is not None else 0

    def reset(self) -> bool:
        """Drops the connection with what it holds; False if it is gone already."""
        if self.kept is not None:
            self.kept.close(reset=True)
            self.let_go()
            return True
        if self.transport.is_closing() and not self.unsent():
            return False
        self.was_reset = True
        reset_connection(self.transport)
        return True

    def address(self) -> str:
        """The address the connection comes from (a proxy's, behind one): uvicorn's ``client`` holds it."""
        return str(self.client[0]) if self.client else "unknown"

    def data_received(self, data: bytes) -> None:
        if self.refused:
            self.transport.pause_reading()  # the app's receive() resumes uvicorn's reading: it stays stopped
            return
        in_head = self in self.waiting.since
        if in_head:
            self.arm()  # a kept-alive connection's next head begins: its deadline runs from now
            if not self.draining:  # a drained body's bytes are the parser's body, not a head
                self.head_bytes += len(data)
        parsed = self.parsed
        self.feed(data)
        # Counted in whole chunks, so checked only while the head is still unfinished: every byte so far is head.
        if in_head and self in self.waiting.since and self.head_bytes > MAX_HEAD_BYTES:
            self.waiting.drop(self, "head_too_large", _CLOSE_431)
        elif not in_head and not self.refused:
            # A request is in: bytes that bring no body byte and end nothing (a chunk's framing, trailers, blank
            # lines after the body) are a head's, which the parser joins; at most MAX_HEAD_BYTES of them in a row.
            self.unparsed = self.unparsed + len(data) if self.parsed == parsed else 0
            if self.unparsed > MAX_HEAD_BYTES and not self.transport.is_closing():
                self.body_done()
                self.reset()
                self.waiting.on_drop("head_too_large")

    def feed(self, data: bytes) -> None:
        """uvicorn's ``data_received``, which a pipelined request stops without the 400 of a bad request."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.refused:
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def on_message_begin(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # Pipelined: the answer being made is the connection's last, and nothing after it is parsed or read.
            self.refused = True
            self.cycle.keep_alive = False
            self.body_done()
            self.transport.pause_reading()
            self.waiting.on_drop("pipelined")
            raise _Pipelined
        super().on_message_begin()

    def on_body(self, body: bytes) -> None:
        self.parsed += 1
        if self.body is not None:
            since, length, seen = self.body
            self.body = (since, length, seen + len(body))
        super().on_body(body)

    def on_chunk_header(self) -> None:
        self.parsed += 1

    def on_chunk_complete(self) -> None:
        self.parsed += 1

    def on_headers_complete(self) -> None:
        self.waiting.done(self)
        self.parsed, self.unparsed = self.parsed + 1, 0
        super().on_headers_complete()
        length = next((v for k, v in self.headers if k == b"content-length"), b"0")
        self.body_done()
        self.body = (time.monotonic(), int(length) if length.isdigit() else 0, 0)
        self.body_deadline = self.loop.call_later(self.body_due(), self.body_late)

    def on_message_complete(self) -> None:
        self.parsed += 1
        self.body_done()
        super().on_message_complete()
        if self.draining:  # the answered body has ended: the next head has a deadline of its own
            self.draining = False
            self.waiting.done(self)
            self.waiting.wait(self)

    def body_due(self) -> float:
        """Seconds until the body being read is late: the head's deadline, then its length (or the bytes that came
        of a chunked one, which may go on as long as it keeps the rate) at ``min_body_rate``."""
        if self.body is None:
            return 0.0
        since, length, seen = self.body
        return since + self.waiting.timeout_s + max(length, seen) / self.min_body_rate - time.monotonic()

    def body_late(self) -> None:
        self.body_deadline = None
        if self.body is None or self.transport.is_closing():
            return
        if (due := self.body_due()) > 0:  # a chunked body that kept the rate
            self.body_deadline = self.loop.call_later(due, self.body_late)
            return
        self.body_done()
        self.reset()
        self.waiting.on_drop("body_deadline")

    def body_done(self) -> None:
        self.body = None
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle.response_complete:  # idle between requests
            self.unparsed = 0
            self.draining = self.body is not None  # answered before its body ended
            self.waiting.wait(self)
            if self.draining:
                self.arm()  # the rest of it must come within a head's deadline of the answer
            if self.unsent() > TRACKED:  # the answer is complete, not yet taken: the kernel may hold all of it
                self.unsent_answers.hold(self)

    def timeout_keep_alive_handler(self) -> None:
        """uvicorn closes a connection idle this long; one whose answer is still being taken (and watched) waits
        on, and one whose client has not taken its answer is reset, or the kernel would keep the answer."""
        if self in self.unsent_answers.held:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        elif self.unsent() and not self.transport.is_closing():
            self.reset()
        else:
            super().timeout_keep_alive_handler()

    def arm(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.waiting.timeout_s, self.waiting.drop, self, "deadline")

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.head_bytes = 0


def protocol_class(
    timeout_s: float,
    max_waiting: int,
    on_drop: Callable[[str], None] = lambda _: None,
    *,
    send_stall_s: float = 30.0,
    max_unsent: int = 1 << 30,
    min_body_rate: float = 1 << 20,
) -> type[HeadBoundedProtocol]:
    """A protocol class for ``uvicorn.run(http=...)``: the bounds above, shared by the connections of one server."""

    class Protocol(HeadBoundedProtocol):
        waiting = Waiting(timeout_s, max_waiting, on_drop)
        unsent_answers = Unsent(send_stall_s, max_unsent, on_drop)

    Protocol.min_body_rate = min_body_rate

    return Protocol
