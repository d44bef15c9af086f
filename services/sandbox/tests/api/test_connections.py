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
from codegym_sandbox.api.connections import GRACE_S, MAX_HEAD_BYTES
from connection_support import BIG, DEADLINE_S, MAX_WAITING, Served, closed, sized, taken


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served().start()
    try:
        yield server
    finally:
        server.stop()


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


def test_an_answer_its_client_does_not_read_is_dropped_with_its_connection() -> None:
    """An answer is written whole into the connection's buffer: a client that never reads had the server hold it
    for as long as it kept the socket (some 1,000 of them, the server's memory)."""
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG, receive_buffer=4096)
        deadline = time.monotonic() + 6
        while not served.dropped and time.monotonic() < deadline:
            time.sleep(0.1)
        assert served.dropped == ["send_stalled"]
        assert taken(s) < BIG  # aborted: the answer went with its buffer
    finally:
        served.stop()


def test_a_slow_reader_that_keeps_reading_gets_its_whole_answer() -> None:
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG)
        got, started = 0, time.monotonic()
        while got < BIG and (data := s.recv(1 << 20)):
            got += len(data)
            time.sleep(0.2)  # some 3 s in all: past the stall, with some of the answer taken between looks
        assert got >= BIG and served.dropped == [] and time.monotonic() - started > 1.0
    finally:
        served.stop()


def test_unread_answers_together_are_bounded_the_longest_waiting_dropped() -> None:
    served = Served(sized, send_stall_s=30.0, max_unsent=BIG + BIG // 2).start()
    try:
        first = served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG, receive_buffer=4096)
        time.sleep(0.5)
        second = served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG, receive_buffer=4096)
        time.sleep(0.5)
        assert served.dropped == ["unsent_bytes"]
        assert taken(first) < BIG < taken(second)  # the younger one's answer is all there (and its head)
    finally:
        served.stop()


def test_a_body_that_stops_coming_is_dropped() -> None:
    """A body one byte short held its request (and every byte of it) for as long as the client kept the socket."""
    served = Served(sized).start()
    try:
        s = served.connect(b"POST /2 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n" + b"x" * 999)
        started = time.monotonic()
        assert closed(s, DEADLINE_S + 3) and served.dropped == ["body_deadline"]
        assert time.monotonic() - started > DEADLINE_S * 0.9
        with httpx.Client() as client:  # a whole body, at once, is answered
            assert client.post(served.url + "/2", content=b"x" * 100_000, timeout=5).text == "xx"
    finally:
        served.stop()


def test_the_client_holding_most_unread_answers_gives_way_first() -> None:
    """Past the bound, the longest-waiting answer once went first: a client's newer unread answers pushed out an
    older answer that another client was reading slowly."""
    # Room for what the kernel charges besides the answers' bytes (its buffers): two answers are within the bound.
    served = Served(sized, send_stall_s=30.0, max_unsent=2 * BIG + (1 << 20)).start()
    try:
        reader = socket.socket()
        reader.bind(("127.0.0.2", 0))  # another client
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.settimeout(5)
        reader.connect(("127.0.0.1", served.port))
        served.sockets.append(reader)
        reader.sendall(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG)
        time.sleep(0.5)
        hog = [
            served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG, receive_buffer=4096) for _ in range(2)
        ]
        time.sleep(0.5)
        assert served.dropped == ["unsent_bytes"]
        assert taken(hog[0]) < BIG and taken(reader) > BIG  # the hog's oldest went; the reader's answer is whole
    finally:
        served.stop()


def test_a_client_seen_reading_keeps_its_answer_against_many_addresses() -> None:
    """Past the bound, a client seen reading its answer keeps it, even where it holds the most (its answer would
    be taken within the stall at its rate): the unread answers of other addresses give way first (spread over
    addresses, they once had the reader aborted)."""
    served = Served(sized, send_stall_s=5.0, max_unsent=3 * BIG).start()
    try:
        reader = served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % (3 * BIG))
        fast, got = threading.Event(), [0]

        def read() -> None:
            with suppress(OSError):
                while got[0] < 3 * BIG and (data := reader.recv(1 << 16)):
                    got[0] += len(data)
                    if not fast.is_set():
                        time.sleep(0.005)  # some 10 MiB a second

        thread = threading.Thread(target=read)
        thread.start()
        time.sleep(1.2)  # watched past JUDGED_S: its rate is known
        hogs = []
        for address in ("127.0.0.2", "127.0.0.3"):
            hog = socket.socket()
            hog.bind((address, 0))
            hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hog.settimeout(5)
            hog.connect(("127.0.0.1", served.port))
            hog.sendall(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % BIG)
            served.sockets.append(hog)
            hogs.append(hog)
            time.sleep(0.1)
        fast.set()
        thread.join(20)
        assert got[0] >= 3 * BIG and "unsent_bytes" in served.dropped, (got[0], served.dropped)
    finally:
        served.stop()
