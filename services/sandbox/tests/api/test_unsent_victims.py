"""Who gives way when unread answers hold more than ``max_unsent`` (``api/unsent.py``), on real sockets: a
connection is judged by the rate its client has shown, once it has had the time to show one."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from contextlib import suppress

import pytest
from codegym_sandbox.api.unsent import Unsent
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


def trickle(sockets: list[socket.socket], stop: threading.Event) -> threading.Thread:
    """Takes a little of each answer every tenth of a second: a client that is seen reading at every look, and
    would take minutes to read its answers."""

    def run() -> None:
        while not stop.wait(0.1):
            for s in sockets:
                with suppress(OSError):
                    s.recv(4096)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_all(s: socket.socket, size: int = SIZE) -> int:
    got = 0
    with suppress(OSError):
        while got < size and (data := s.recv(1 << 16)):
            got += len(data)
    return got


def held_by_trickles(addresses: list[str], max_unsent: int) -> tuple[Served, threading.Event]:
    served = Served(sized, send_stall_s=0.3, max_unsent=max_unsent).start()
    stop = threading.Event()
    trickle([ask(served, a) for a in addresses], stop)
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
    addresses; or from one, whose answers past a quarter of the bound go before another client's)."""
    served, stop = held_by_trickles(addresses, max_unsent=4 * SIZE + SIZE // 4)
    try:
        honest = ask(served, "127.0.0.1")
        assert read_all(honest) >= SIZE, served.dropped
        assert served.dropped.count("unsent_bytes") >= 1
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

    def taken(self) -> int:
        return self.took

    def address(self) -> str:
        return self.addr

    def reset(self) -> bool:
        self.was_reset = True
        return True


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
        assert unsent.first_to_go() in many
        unsent.max_bytes = 1000 << 20  # a quarter is 250 MiB: no one past its share, the slowest goes first
        assert unsent.first_to_go() is slow
    finally:
        for conn in [slow, *many]:
            unsent.release(conn)
            conn.loop.close()
