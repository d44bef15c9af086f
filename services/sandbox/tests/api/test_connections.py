"""The bounds on connections that have not sent their request head (``api/connections.py``), on real sockets:
uvicorn on loopback in a thread, serving a plain ASGI app, with a short deadline and a small bound."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress

import httpx
import pytest
import uvicorn
from codegym_sandbox.api.connections import GRACE_S, MAX_HEAD_BYTES, protocol_class
from starlette.types import Receive, Scope, Send

DEADLINE_S = 1.0
MAX_WAITING = 8


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class Served:
    def __init__(self) -> None:
        self.dropped: list[str] = []
        self.sockets: list[socket.socket] = []
        config = uvicorn.Config(
            hello,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_level="warning",
            http=protocol_class(DEADLINE_S, MAX_WAITING, self.dropped.append),
            timeout_keep_alive=30,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> Served:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        (sock,) = self.server.servers[0].sockets
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        for s in self.sockets:
            s.close()
        self.server.should_exit = True
        self.thread.join(10)

    def connect(self, sent: bytes = b"") -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.sockets.append(s)
        if sent:
            s.sendall(sent)
        return s


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served().start()
    try:
        yield server
    finally:
        server.stop()


def closed(s: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``s`` within ``within_s`` (what it sends before is read and dropped)."""
    s.settimeout(within_s)
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


HALF = b"POST /run_code HTTP/1.1\r\nHost: localhost\r\nX-Slow: "


def test_an_unfinished_head_is_closed_at_the_deadline(served: Served) -> None:
    silent, half = served.connect(), served.connect(HALF)
    started = time.monotonic()
    assert closed(silent, 5) and closed(half, 5)
    assert DEADLINE_S * 0.9 < time.monotonic() - started < DEADLINE_S + 3
    assert served.dropped == ["deadline", "deadline"]


def test_a_trickled_head_is_closed_at_the_deadline_too(served: Served) -> None:
    """A byte every tenth of a second keeps a connection from ever being idle: the deadline is the head's."""
    s = served.connect(HALF)
    started = time.monotonic()
    with suppress(OSError):
        while time.monotonic() - started < DEADLINE_S + 3:
            s.sendall(b"x")
            time.sleep(0.1)
    assert DEADLINE_S * 0.9 < time.monotonic() - started < DEADLINE_S + 3
    assert closed(s, 1) and served.dropped == ["deadline"]


def test_a_kept_alive_connection_gets_a_deadline_for_each_head(served: Served) -> None:
    s = served.connect(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert s.recv(4096).endswith(b"ok")
    time.sleep(DEADLINE_S * 1.5)  # idle between requests: kept alive, uvicorn's keep-alive timeout bounds it
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert s.recv(4096).endswith(b"ok")
    s.sendall(b"GET / HTTP/1.1\r\nHost: loc")
    assert closed(s, DEADLINE_S + 3) and served.dropped == ["deadline"]


def test_honest_clients_are_answered_beside_many_slow_ones(served: Served) -> None:
    slow = [served.connect(HALF) for _ in range(5 * MAX_WAITING)]
    time.sleep(GRACE_S + 0.2)
    with httpx.Client() as client:
        for _ in range(3):
            assert client.get(served.url, timeout=5).text == "ok"
    # The slow connections past the bound were closed at once, the longest-waiting first, the rest at the deadline.
    assert served.dropped.count("crowded") >= 4 * MAX_WAITING - 1
    assert all(closed(s, DEADLINE_S + 3) for s in slow)
    assert served.dropped.count("crowded") + served.dropped.count("deadline") == len(slow)


def test_a_burst_of_honest_connections_is_not_dropped(served: Served) -> None:
    """Connections of one burst may all be accepted before any head is read: within the grace they are kept."""

    async def burst() -> list[str]:
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
            answers = await asyncio.gather(*(client.get(served.url, timeout=10) for _ in range(3 * MAX_WAITING)))
        return [r.text for r in answers]

    assert asyncio.run(burst()) == ["ok"] * (3 * MAX_WAITING)
    assert served.dropped == []


def test_a_head_too_large_is_refused(served: Served) -> None:
    s = served.connect(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
    with suppress(OSError):
        for _ in range(MAX_HEAD_BYTES // 1000 + 2):
            s.sendall(b"X-Pad: " + b"p" * 991 + b"\r\n")
    s.settimeout(5)
    assert s.recv(4096).startswith(b"HTTP/1.1 431 ")
    assert served.dropped == ["head_too_large"]
    with httpx.Client() as client:
        assert client.get(served.url, headers={"X-Pad": "p" * 8000}, timeout=5).text == "ok"
