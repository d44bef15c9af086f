"""Answers that wait for their clients to read them: what they hold, in the server and in the kernel, and who
gives way when they hold too much.

An answer is written whole into its connection's transport, which hands the kernel what the socket's send
queue takes and keeps the rest. Both are the server's to answer for: the transport's buffer is its memory, the
send queue the host's TCP memory (one pool for every socket of the machine). So each accepted socket's send
buffer is capped (``SEND_BUFFER``), a connection's unsent bytes are the transport's buffer and the socket's
queue together, and a dropped connection is reset (``SO_LINGER`` zero, then aborted): a plain close, or an
abort, leaves the queue to the kernel, which goes on offering it for as long as the client keeps its window
shut. An answer left with more than ``TRACKED`` bytes unsent, in either, is watched from then on.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import termios
from collections.abc import Callable
from contextlib import suppress
from typing import Protocol

# What each accepted socket's send queue may hold (the kernel doubles it for its bookkeeping, and no longer grows
# it by itself): some 370 KiB of answer a connection; 1 ms of loopback, and 40 MB/s at a 10 ms round trip.
SEND_BUFFER = 256 << 10
# uvicorn's high-water mark: answers with less left unsent are not watched (each one's rest is at most this).
TRACKED = 64 << 10
_ACKED_AT = 120  # struct tcp_info's tcpi_bytes_acked (Linux 4.2 and later)


def cap_send_buffer(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)


def kernel_queue(transport: asyncio.BaseTransport) -> int:
    """Bytes of the socket's send queue: written to it, not yet taken by the client's side."""
    sock = transport.get_extra_info("socket")
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0])
    except (AttributeError, OSError, ValueError):
        return 0


def kernel_taken(transport: asyncio.BaseTransport) -> int:
    """Bytes the client's side has taken over the connection's life (0 where the kernel does not say)."""
    sock = transport.get_extra_info("socket")
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _ACKED_AT + 8)
    except (AttributeError, OSError, ValueError):
        return 0
    return int(struct.unpack_from("Q", info, _ACKED_AT)[0]) if len(info) >= _ACKED_AT + 8 else 0


def reset_connection(transport: asyncio.Transport) -> None:
    """Aborts the connection with what it holds, in the transport and in the kernel (a reset, not a close)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class Answering(Protocol):
    """A connection as :class:`Unsent` sees it."""

    loop: asyncio.AbstractEventLoop

    def unsent(self) -> int: ...
    def taken(self) -> int: ...
    def address(self) -> str: ...
    def reset(self) -> bool: ...


class Unsent:
    """The connections of one server whose answers wait for their clients to read them."""

    def __init__(self, stall_s: float, max_bytes: int, on_drop: Callable[[str], None]) -> None:
        self.stall_s, self.max_bytes, self.on_drop = stall_s, max_bytes, on_drop
        # Each one's bytes taken by its client and left unsent at the last look, whether its client took some by
        # then, and its next look.
        self.held: dict[Answering, tuple[int, int, bool, asyncio.TimerHandle]] = {}

    def hold(self, conn: Answering) -> None:
        if conn in self.held:
            return
        self.held[conn] = (conn.taken(), conn.unsent(), False, conn.loop.call_later(self.stall_s, self.look, conn))
        while len(self.held) > 1 and sum(c.unsent() for c in self.held) > self.max_bytes:
            self.drop(self.first_to_go(), "unsent_bytes")

    def first_to_go(self) -> Answering:
        """Past the bound, who gives way: an answer whose client has not been seen reading it (at a look) before
        one whose client reads (however many addresses the others come from), then the client holding the most,
        and its longest-waiting answer."""

        pool = [c for c in self.held if not self.held[c][2]] or list(self.held)
        held: dict[str, int] = {}
        for c in pool:
            held[c.address()] = held.get(c.address(), 0) + c.unsent()
        most = max(held, key=held.__getitem__)
        return next(c for c in pool if c.address() == most)

    def release(self, conn: Answering) -> None:
        _, _, _, timer = self.held.pop(conn, (0, 0, False, None))
        if timer is not None:
            timer.cancel()

    def look(self, conn: Answering) -> None:
        """A watched connection's client must have taken some of its answer since the last look."""
        if conn not in self.held:
            return
        if conn.unsent() <= TRACKED:
            self.release(conn)
            return
        if not self.took(conn):
            self.drop(conn, "send_stalled")
            return
        self.held[conn] = (conn.taken(), conn.unsent(), True, conn.loop.call_later(self.stall_s, self.look, conn))

    def took(self, conn: Answering) -> bool:
        """Whether its client took some of its answer since the last look: the kernel's count, or (where the
        kernel does not say) fewer bytes left."""
        taken, unsent, _, _ = self.held[conn]
        return conn.taken() > taken or conn.unsent() < unsent

    def drop(self, conn: Answering, why: str) -> None:
        self.release(conn)
        if conn.reset():
            self.on_drop(why)
