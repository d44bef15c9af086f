"""Answers that wait for their clients to read them: what they hold, in the server and in the kernel, and who
gives way when they hold too much.

An answer is written whole into its connection's transport, which hands the kernel what the socket's send
queue takes and keeps the rest. Both are the server's to answer for: the transport's buffer is its memory, the
send queue the host's TCP memory (one pool for every socket of the machine). So each accepted socket's send
buffer is capped (``SEND_BUFFER``), a connection's unsent bytes are the transport's buffer and the socket's
queue together, and a dropped connection is reset (``SO_LINGER`` zero, then aborted): a plain close, or an
abort, leaves the queue to the kernel, which goes on offering it for as long as the client keeps its window
shut. An answer left with more than ``TRACKED`` bytes unsent, in either, is watched from then on; a
connection closed with any of its answer still in the kernel's queue is kept (``keep_socket``) and watched
until its client has taken all of it, or it is reset: the kernel is never left a queue that nothing counts.
And the kernel itself ends a connection whose client has taken nothing for twice the stall
(``TCP_USER_TIMEOUT``, zero-window probes included), whatever the server does or whether it still runs.
"""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import socket
import struct
import termios
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol

# What each accepted socket's send queue may hold (the kernel doubles it for its bookkeeping, and no longer grows
# it by itself): some 370 KiB of answer a connection; 1 ms of loopback, and 40 MB/s at a 10 ms round trip.
SEND_BUFFER = 256 << 10
# uvicorn's high-water mark: answers with less left unsent are not watched (each one's rest is at most this).
TRACKED = 64 << 10
# How long a connection is watched before its client's rate is judged: time for an honest client to show it reads.
JUDGED_S = 1.0
_ACKED_AT = 120  # struct tcp_info's tcpi_bytes_acked (Linux 4.2 and later)
# SO_MEMINFO (Linux 3.19 and later): nine u32, the sixth the send queue's buffers (SK_MEMINFO_WMEM_QUEUED).
_MEMINFO, _MEMINFO_SIZE, _QUEUED_AT = 55, 36, 20
_KEPT_LOOK_S = (0.01, 1.0)  # how often a kept socket's queue is looked at: at first, and at most


def bound_socket(sock: Any, stall_s: float) -> None:
    """Caps an accepted socket's send queue, and has the kernel end its connection once its client has taken
    nothing for twice ``stall_s`` (data unacknowledged, or a window kept shut, zero-window probes answered or
    not): after the watch's own rule, and for whatever the server no longer holds (its sockets once it exits)."""
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        with suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, max(1, int(2000 * stall_s)))


def kernel_queue(sock: Any) -> int:
    """What the socket's send queue holds of the host's TCP memory: its bytes (written to it, not yet taken by the
    client's side), or what the kernel charges for them, if more. It charges its buffers whole: an answer sent
    in a client's small segments costs it two or three times its bytes."""
    try:
        queued = int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0])
    except (AttributeError, OSError, ValueError):
        return 0
    try:
        charged = struct.unpack_from("I", sock.getsockopt(socket.SOL_SOCKET, _MEMINFO, _MEMINFO_SIZE), _QUEUED_AT)
    except (AttributeError, OSError, ValueError, struct.error):
        return queued
    return max(queued, int(charged[0]))


def kernel_taken(sock: Any) -> int:
    """Bytes the client's side has taken over the connection's life (0 where the kernel does not say)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _ACKED_AT + 8)
    except (AttributeError, OSError, ValueError):
        return 0
    return int(struct.unpack_from("Q", info, _ACKED_AT)[0]) if len(info) >= _ACKED_AT + 8 else 0


def keep_socket(sock: Any) -> socket.socket | None:
    """The socket of a connection being closed, if its send queue is not empty: a descriptor of its own, that the
    transport's close does not close, and its end sent after the queue (as the close would have). None if the
    queue is empty (the close leaves the kernel nothing to offer)."""
    if not kernel_queue(sock):
        return None
    try:
        kept = socket.socket(fileno=os.dup(sock.fileno()))
    except (AttributeError, OSError, ValueError):
        return None
    with suppress(OSError):
        kept.shutdown(socket.SHUT_WR)
    return kept


class Kept:
    """A socket that ``keep_socket`` kept: its queue is looked at, often at first (most are taken within a round
    trip), until its client has taken it all; then it is closed, and ``on_taken`` told."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, on_taken: Callable[[], None]) -> None:
        self.sock, self.loop, self.on_taken = sock, loop, on_taken
        self.looking = loop.call_later(_KEPT_LOOK_S[0], self.look, _KEPT_LOOK_S[0])

    def look(self, after_s: float) -> None:
        if kernel_queue(self.sock):
            after_s = min(2 * after_s, _KEPT_LOOK_S[1])
            self.looking = self.loop.call_later(after_s, self.look, after_s)
            return
        self.sock.close()
        self.on_taken()

    def close(self, reset: bool) -> None:
        """Closes it before its queue is taken: with a reset (its queue freed), or left to the kernel."""
        self.looking.cancel()
        if reset:
            with suppress(OSError):
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


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
    def unwatched(self) -> int: ...
    def taken(self) -> int: ...
    def address(self) -> str: ...
    def reset(self) -> bool: ...


@dataclass
class _Watch:
    """A watched connection: when it was first watched and what its client had taken and left unsent then, the
    same at the last look, its next look, and whether it is judged yet (and when it will be)."""

    since: float
    first: tuple[int, int]
    last: tuple[int, int]
    look: asyncio.TimerHandle
    judging: asyncio.TimerHandle
    judged: bool = False


class Unsent:
    """The connections of one server whose answers wait for their clients to read them.

    A connection is judged by the rate at which its client has taken its answer since it was first watched, once
    watched for ``JUDGED_S``: until then its client has had no chance to show that it reads, and no answer gives
    way to one whose client has not. So judged answers hold at most ``max_bytes``, the slowest giving way, and new
    answers may take the sum past it by half as much again while they wait to be judged, the client holding the
    most giving way: each kind keeps to its bound among its own, and the server holds at most 1.5 ``max_bytes``."""

    def __init__(self, stall_s: float, max_bytes: int, on_drop: Callable[[str], None]) -> None:
        self.stall_s, self.max_bytes, self.on_drop = stall_s, max_bytes, on_drop
        self.held: dict[Answering, _Watch] = {}  # insertion order: the longest-watched first

    def hold(self, conn: Answering) -> None:
        if conn in self.held:
            return
        now = (conn.taken(), conn.unsent())
        look = conn.loop.call_later(self.stall_s, self.look, conn)
        judging = conn.loop.call_later(JUDGED_S, self.judge, conn)
        self.held[conn] = _Watch(time.monotonic(), now, now, look, judging)
        self.enforce()

    def judge(self, conn: Answering) -> None:
        # Set by the timer, not read off the clock: a timer may run a hair before its time.
        if (watch := self.held.get(conn)) is not None:
            watch.judged = True
            self.enforce()

    def enforce(self) -> None:
        while len(self.held) > 1 and (conn := self.first_to_go()) is not None:
            self.drop(conn, "unsent_bytes")

    def first_to_go(self) -> Answering | None:
        """Who gives way now, if anyone: past the bound (all answers together over ``max_bytes``), a judged
        answer if those judged alone are over it, a new one if new ones are over half of it; else no one yet (new
        answers wait to be judged, and the bound is checked again as each one is). A new answer is never weighed
        against a judged one: when it is first held its client has had no time to read it, and judged then (as
        unread, or as new) it would go behind the answers of a client that reads its own just fast enough, from
        one address; nor does a new one push out a judged one, however many unread new answers come."""
        judged = [c for c, watch in self.held.items() if watch.judged]
        new = [c for c, watch in self.held.items() if not watch.judged]
        judged_bytes, new_bytes = sum(c.unsent() for c in judged), sum(c.unsent() for c in new)
        if judged_bytes + new_bytes <= self.max_bytes:
            return None
        if judged_bytes > self.max_bytes:
            return self.slowest(judged)
        if new_bytes > self.max_bytes // 2:
            return self.holding_most(new)
        return None

    def slowest(self, judged: list[Answering]) -> Answering:
        """Among judged answers, the one that would take its client longest to take at the rate it has shown
        (one not taken at all first): it would hold its bytes longest, whatever the stall. Before them, one that
        would take longer than ``stall_s``, of a client holding more than its share (a quarter of the bound): a
        client that reads its many answers a little faster than the slowest honest reader pushes out its own. So
        a client holds the bound against another's answer, from however many addresses, only by reading its own
        faster than that one's client reads it; a slow reader of a large answer is the first to go when answers
        read faster fill the bound."""
        now, held, share = time.monotonic(), self.held_by_address(), self.max_bytes // 4

        def drain_s(c: Answering) -> float:
            watch = self.held[c]
            taken = max(c.taken() - watch.first[0], watch.first[1] - c.unsent())
            return c.unsent() * max(now - watch.since, 1e-3) / taken if taken > 0 else math.inf

        late = {c: drain_s(c) for c in judged}
        return max(
            judged,
            key=lambda c: (
                late[c] > self.stall_s and held[c.address()] > share,
                late[c],
                held[c.address()],
                -self.held[c].since,
            ),
        )

    def holding_most(self, new: list[Answering]) -> Answering:
        """Among new answers, the client holding the most gives way first, its longest-watched: a client that
        makes answers faster than it reads them pushes out its own first."""
        held = self.held_by_address()
        return max(new, key=lambda c: (held[c.address()], -self.held[c].since))

    def held_by_address(self) -> dict[str, int]:
        held: dict[str, int] = {}
        for c in self.held:
            held[c.address()] = held.get(c.address(), 0) + c.unsent()
        return held

    def release(self, conn: Answering) -> None:
        watch = self.held.pop(conn, None)
        if watch is not None:
            watch.look.cancel()
            watch.judging.cancel()

    def look(self, conn: Answering) -> None:
        """A watched connection's client must have taken some of its answer since the last look."""
        if (watch := self.held.get(conn)) is None:
            return
        if conn.unsent() <= conn.unwatched():
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
