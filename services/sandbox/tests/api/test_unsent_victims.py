"""Who gives way when unread answers hold more than ``max_unsent`` (``api/unsent.py``), on real sockets: a
connection is judged by the rate its client has shown, once it has had the time to show one, and a new one is
never weighed against a judged one."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
import time
from contextlib import suppress

import pytest
from codegym_sandbox.api.unsent import TRACKED, Unsent
from connection_support import Served, sized

SIZE = 4 << 20  # past what a socket's capped send queue takes: the rest waits in the server's buffer


def ask(served: Served, address: str, size: int = SIZE) -> socket.socket:
    s = socket.socket()
    s.bind((address, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", served.port))
    s.sendall(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % size)
    served.sockets.append(s)
    return s


def trickle(sockets: list[socket.socket], stop: threading.Event, per_tenth: int = 4096) -> threading.Thread:
    """Takes ``per_tenth`` bytes of each answer every tenth of a second: by default a client that is seen reading
    at every look, and would take minutes to read its answers."""

    def run() -> None:
        while not stop.wait(0.1):
            for s in sockets:
                got = 0
                with suppress(OSError):
                    while got < per_tenth and (data := s.recv(per_tenth - got)):
                        got += len(data)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_all(s: socket.socket, size: int = SIZE, rate: float = math.inf) -> int:
    """Bytes of the answer read, at ``rate`` bytes a second at most, until it is whole or the server drops it."""
    got, started = 0, time.monotonic()
    with suppress(OSError):
        while got < size and (data := s.recv(1 << 16)):
            got += len(data)
            time.sleep(max(0.0, got / rate - (time.monotonic() - started)))
    return got


def held_by_trickles(
    addresses: list[str], max_unsent: int, stall_s: float = 0.3, per_tenth: int = 4096
) -> tuple[Served, threading.Event]:
    served = Served(sized, send_stall_s=stall_s, max_unsent=max_unsent).start()
    stop = threading.Event()
    trickle([ask(served, a) for a in addresses], stop, per_tenth)
    time.sleep(1.5)  # looked at a few times, and watched past JUDGED_S: each one seen reading, slowly
    return served, stop


@pytest.mark.parametrize(
    "addresses",
    [["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], ["127.0.0.2"] * 4],
    ids=["many-addresses", "one-address-past-its-share"],
)
def test_a_newly_held_answer_is_not_the_first_to_go(addresses: list[str]) -> None:
    """A connection whose answer had just filled its buffer had had no time to be seen reading: past the bound
    it went first, every time, behind answers trickled a little between looks by their clients (from many
    addresses, or from one). Now it waits to be judged, and its client reads it whole."""
    served, stop = held_by_trickles(addresses, max_unsent=4 * SIZE + SIZE // 4)
    try:
        honest = ask(served, "127.0.0.1")
        assert read_all(honest) >= SIZE, served.dropped
    finally:
        stop.set()
        served.stop()


@pytest.mark.parametrize("rate", [math.inf, 1 << 20], ids=["read-at-once", "read-in-four-seconds"])
def test_answers_read_just_fast_enough_do_not_push_out_a_new_one(rate: float) -> None:
    """A client that read its own answers fast enough to take them within the stall (some 26 s each, at 160 KiB a
    second) was never judged slow, and an answer not judged yet went before them: from one address, it had every
    other client's new answer reset the moment it pushed the sum past the bound, before its client could read.
    Now the new answer waits to be judged; read faster than theirs, it stays, and one of theirs goes."""
    served, stop = held_by_trickles(
        ["127.0.0.2"] * 2, max_unsent=2 * SIZE + SIZE // 4, stall_s=30.0, per_tenth=16 << 10
    )
    try:
        honest = ask(served, "127.0.0.1")
        assert read_all(honest, rate=rate) >= SIZE, served.dropped
        assert served.dropped == ([] if rate == math.inf else ["unsent_bytes"])
    finally:
        stop.set()
        served.stop()


class Held:
    """A connection as ``Unsent`` sees it, its numbers set by the test."""

    def __init__(self, address: str, unsent: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.addr, self.left, self.took, self.was_reset = address, unsent, 0, False

    def unsent(self) -> int:
        return self.left

    def unwatched(self) -> int:
        return TRACKED

    def taken(self) -> int:
        return self.took

    def address(self) -> str:
        return self.addr

    def reset(self) -> bool:
        self.was_reset = True
        return True


MIB = 1 << 20


def judged(conn: Held, unsent: Unsent, watched_s: float, took: int) -> None:
    """Sets ``conn`` watched for ``watched_s``, its client having taken ``took`` of its answer since."""
    unsent.held[conn].since -= watched_s
    unsent.held[conn].judged = True
    conn.took, conn.left = conn.took + took, conn.left - took


def test_a_new_answer_waits_to_be_judged_then_the_slower_goes() -> None:
    """Answers read within the stall, and a new one past the bound: no one goes until the new one is judged,
    then the one its client would take longest to take (whatever the stall)."""
    unsent = Unsent(stall_s=30.0, max_bytes=1 << 40, on_drop=lambda _: None)
    theirs = [Held("10.0.0.2", 60 * MIB) for _ in range(2)]
    new = Held("10.0.0.1", 30 * MIB)
    try:
        for conn in theirs:
            unsent.hold(conn)
            judged(conn, unsent, 10.0, 20 * MIB)  # 40 MiB left, 20 s to go
        unsent.max_bytes = 100 * MIB
        unsent.hold(new)  # 110 MiB in all
        assert unsent.first_to_go() is None and not any(c.was_reset for c in [*theirs, new])
        judged(new, unsent, 1.5, 5 * MIB)  # 25 MiB left, 7.5 s to go: judged ones hold 105 MiB
        unsent.enforce()
        assert [c.was_reset for c in [*theirs, new]] == [True, False, False]
    finally:
        for conn in [*theirs, new]:
            unsent.release(conn)
            conn.loop.close()


def test_new_answers_past_half_the_bound_push_out_their_own_not_a_reader() -> None:
    """A client that makes new answers faster than they are judged, and reads none, fills the half of the bound
    new answers may take: its own go, not an answer its client is reading."""
    unsent = Unsent(stall_s=30.0, max_bytes=100 * MIB, on_drop=lambda _: None)
    reader = Held("10.0.0.1", 60 * MIB)
    many = [Held("10.0.0.2", 20 * MIB) for _ in range(4)]
    try:
        unsent.hold(reader)
        judged(reader, unsent, 2.0, 20 * MIB)  # 40 MiB left, 4 s to go
        for conn in many:
            unsent.hold(conn)
        assert [c.was_reset for c in [reader, *many]] == [False, True, False, False, False]
    finally:
        for conn in [reader, *many]:
            unsent.release(conn)
            conn.loop.close()


def test_past_its_share_a_client_goes_before_a_slower_reader() -> None:
    """Judged by rate alone, a client could keep the bound full with answers it takes a little faster than the
    slowest honest reader; past its share, its own answers go first."""
    unsent = Unsent(stall_s=30.0, max_bytes=100 << 20, on_drop=lambda _: None)
    slow = Held("10.0.0.1", 20 << 20)
    many = [Held("10.0.0.2", 20 << 20) for _ in range(4)]
    try:
        for conn in [slow, *many]:
            unsent.hold(conn)
            unsent.held[conn].since -= 60  # watched a minute
        slow.took, slow.left = 100 << 10, slow.left - (100 << 10)  # some 3 hours to go at its rate
        for conn in many:
            conn.took, conn.left = 1 << 20, conn.left - (1 << 20)  # some 20 minutes to go
        assert unsent.slowest(list(unsent.held)) in many
        unsent.max_bytes = 1000 << 20  # a quarter is 250 MiB: no one past its share, the slowest goes first
        assert unsent.slowest(list(unsent.held)) is slow
    finally:
        for conn in [slow, *many]:
            unsent.release(conn)
            conn.loop.close()
