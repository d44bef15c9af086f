"""One request at a time on a connection (``api/connections.py``), on real sockets: the parser never runs ahead
of the app, so a connection's next requests, or a body's trailers, are not read where no bound sees them."""

from __future__ import annotations

import asyncio
import socket
import time
from contextlib import suppress

import httpx
from codegym_sandbox.api.connections import MAX_HEAD_BYTES
from connection_support import BIG, Served, closed, sized
from starlette.types import Receive, Scope, Send

GET = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


class Slow:
    """Answers ``ok`` a while after each request, counting the requests that reached it."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.calls += 1
        await asyncio.sleep(0.5)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def everything(s: socket.socket, within_s: float = 5) -> bytes:
    """What the server sends on ``s`` until it closes it, or ``within_s`` pass."""
    s.settimeout(within_s)
    got, deadline = b"", time.monotonic() + within_s
    with suppress(ConnectionResetError, TimeoutError):
        while time.monotonic() < deadline and (data := s.recv(1 << 16)):
            got += data
    return got


def test_pipelined_requests_are_not_parsed_ahead() -> None:
    """uvicorn parsed every request of a read at once, each into a request queued behind the one served, and
    read on after each answer: one connection grew the server without end, before any token or bound."""
    app = Slow()
    served = Served(app).start()
    try:
        s = served.connect(GET * 2000)
        answer = everything(s)
        assert answer.count(b"HTTP/1.1 ") == 1 and b"connection: close" in answer.lower()
        assert app.calls == 1 and served.dropped == ["pipelined"]
        with httpx.Client() as client:  # kept alive, one request after another: every one answered, fast
            assert [client.get(served.url, timeout=5).text for _ in range(3)] == ["ok"] * 3
        assert app.calls == 4 and served.dropped == ["pipelined"]
    finally:
        served.stop()


def test_the_next_head_is_not_read_while_a_request_is_served() -> None:
    """The next request's head was read while one was served, outside the head's deadline and size, and joined
    as it came: an endless header took the event loop and the server's memory for as long as that request ran."""
    app = Slow()
    served = Served(app).start()
    try:
        s = served.connect(GET)
        time.sleep(0.1)
        with suppress(OSError):
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-A: " + b"a" * (4 * MAX_HEAD_BYTES))
        answer = everything(s)
        assert answer.startswith(b"HTTP/1.1 200 ") and b"connection: close" in answer.lower()
        assert answer.endswith(b"ok") and served.dropped == ["pipelined"] and app.calls == 1
    finally:
        served.stop()


CHUNKED = b"POST /2 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"


def test_a_body_trailer_counts_as_a_head() -> None:
    """A chunked body's trailer is header lines, which the parser joins as they come: it went on as long as the
    client liked, the body's bounds counting none of it."""
    served = Served(sized).start()
    try:
        s = served.connect(CHUNKED + b"0\r\nX-T: a\r\n\r\n")  # a small trailer is a body's end like any other
        assert s.recv(4096).endswith(b"xx")
        s = served.connect(CHUNKED + b"0\r\nX-T: ")
        with suppress(OSError):
            for _ in range(4 * MAX_HEAD_BYTES // 4096):
                s.sendall(b"a" * 4096)
                time.sleep(0.001)
        assert closed(s, 3) and served.dropped == ["head_too_large"]
    finally:
        served.stop()


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers 413 at once, reading no body: as ``guard.py`` answers a body whose length is over its limit."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"8")]})
    await send({"type": "http.response.body", "body": b"too big!"})


def test_a_body_answered_before_its_end_is_read_and_its_answer_arrives() -> None:
    # A client sends its whole body before it reads (httpx's async one does); the rest of the body, counted as
    # the next head, closed the connection under it (a reset), and the client never saw the 413: it took it for
    # a server that failed, and could not send less instead.
    served = Served(refuse).start()

    async def post_twice() -> list[int]:  # the connection serves the next request too
        async with httpx.AsyncClient(base_url=served.url) as client:
            return [(await client.post("/", content=b"x" * BIG)).status_code for _ in range(2)]

    try:
        assert asyncio.run(post_twice()) == [413, 413]
        s = served.connect(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000000\r\n\r\n" + b"x" * 1000)
        assert closed(s, 3)  # what is left of it must still come within the next head's deadline
        assert served.dropped == ["deadline"]
    finally:
        served.stop()
