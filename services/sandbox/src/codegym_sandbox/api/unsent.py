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
import math
import socket
import struct
import termios
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Protocol

# What each accepted socket's send queue may hold (the kernel doubles it for its bookkeeping, and no longer grows
# it by itself): some 370 KiB of answer a connection; 1 ms of loopback, and 40 MB/s at a 10 ms round trip.
SEND_BUFFER = 256 << 10
# uvicorn's high-water mark: answers with less left unsent are not watched (each one's rest is at most this).
TRACKED = 64 << 10
# How long a connection is watched before its client's rate is judged: time for an honest client to show it reads.
JUDGED_S = 1.0
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


@dataclass
class _Watch:
    """A watched connection: when it was first watched and what its client had taken and left unsent then, the
    same at the last look, and its next look."""

    since: float
    first: tuple[int, int]
    last: tuple[int, int]
    look: asyncio.TimerHandle


class Unsent:
    """The connections of one server whose answers wait for their clients to read them."""

    def __init__(self, stall_s: float, max_bytes: int, on_drop: Callable[[str], None]) -> None:
        self.stall_s, self.max_bytes, self.on_drop = stall_s, max_bytes, on_drop
        self.held: dict[Answering, _Watch] = {}  # insertion order: the longest-watched first

    def hold(self, conn: Answering) -> None:
        if conn in self.held:
            return
        now = (conn.taken(), conn.unsent())
        self.held[conn] = _Watch(time.monotonic(), now, now, conn.loop.call_later(self.stall_s, self.look, conn))
        while len(self.held) > 1 and sum(c.unsent() for c in self.held) > self.max_bytes:
            self.drop(self.first_to_go(), "unsent_bytes")

    def first_to_go(self) -> Answering:
        """Past the bound, who gives way. A connection is judged by the rate at which its client has taken its
        answer since it was first watched, once watched for ``JUDGED_S`` (one just watched has not had the time to
        show that its client reads: the newest answer is not the first to go for being the newest). First an
        answer judged slow, one that would take its client longer than ``stall_s`` to take at that rate: a client
        holding more than its share (a quarter of the bound) first, then the slowest (one not taken at all first),
        the client holding the most, its longest-watched; then one not judged yet: the client holding the most,
        its longest-watched; then the slowest of the rest. So a client that trickles its answers gives way before
        one that reads, however many answers it holds, from however many addresses, and new answers before one
        that is being read."""
        now = time.monotonic()
        held: dict[str, int] = {}
        for c in self.held:
            held[c.address()] = held.get(c.address(), 0) + c.unsent()

        def drain_s(c: Answering) -> float:
            watch = self.held[c]
            taken = max(c.taken() - watch.first[0], watch.first[1] - c.unsent())
            return c.unsent() * max(now - watch.since, 1e-3) / taken if taken > 0 else math.inf

        judged = {c: drain_s(c) for c in self.held if now - self.held[c].since >= JUDGED_S}
        if slow := [c for c, late in judged.items() if late > self.stall_s]:
            share = self.max_bytes // 4
            return max(
                slow, key=lambda c: (held[c.address()] > share, judged[c], held[c.address()], -self.held[c].since)
            )
        if new := [c for c in self.held if c not in judged]:
            return max(new, key=lambda c: (held[c.address()], -self.held[c].since))
        return max(judged, key=judged.__getitem__)

    def release(self, conn: Answering) -> None:
        watch = self.held.pop(conn, None)
        if watch is not None:
            watch.look.cancel()

    def look(self, conn: Answering) -> None:
        """A watched connection's client must have taken some of its answer since the last look."""
        if (watch := self.held.get(conn)) is None:
            return
        if conn.unsent() <= TRACKED:
            self.release(conn)
            return
        taken, unsent = watch.last
        # The kernel's count, or (where the kernel does not say) fewer bytes left.
        if conn.taken() <= taken and conn.unsent() >= unsent:
            self.drop(conn, "send_stalled")
            return
        watch.last = (conn.taken(), conn.unsent())
        watch.look = conn.loop.call_later(self.stall_s, self.look, conn)

    def drop(self, conn: Answering, why: str) -> None:
        self.release(conn)
        if conn.reset():
            self.on_drop(why)
