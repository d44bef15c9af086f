"""Unread answers in the kernel's socket queue (``api/unsent.py``), on real sockets: counted with the server's
buffer, watched for a client that takes none of them, and freed when their connection is dropped."""

from __future__ import annotations

import socket
import time

import pytest
from codegym_sandbox.api.unsent import SEND_BUFFER, kernel_queue
from connection_support import BIG, Served, sized, taken

SMALL = 300 << 10  # an answer the socket's queue takes whole: the server's buffer never fills


def ask(served: Served, size: int) -> socket.socket:
    return served.connect(b"GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % size, receive_buffer=4096)


def until(served: Served, dropped: int, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while len(served.dropped) < dropped and time.monotonic() < deadline:
        time.sleep(0.05)


def test_an_answer_the_kernel_took_whole_is_watched_too() -> None:
    """An answer the socket's queue took whole never filled the server's buffer: nothing watched it, and the
    kernel held it (some 4 MiB a connection) for as long as the client kept the socket."""
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = ask(served, SMALL)
        until(served, 1, 5)
        assert served.dropped == ["send_stalled"]
        assert taken(s) < SMALL
    finally:
        served.stop()


def test_unread_answers_in_the_kernel_count_against_the_bound() -> None:
    # Each is charged some 1.4 times its bytes (the kernel's buffers for a client's small window): the third
    # answer takes the sum past the bound, the second does not.
    served = Served(sized, send_stall_s=30.0, max_unsent=3 * SMALL + SMALL // 2).start()
    try:
        clients = []
        for _ in range(3):
            clients.append(ask(served, SMALL))
            time.sleep(0.3)
        until(served, 1, 2)
        assert served.dropped == ["unsent_bytes"]
    finally:
        served.stop()


def test_a_dropped_answer_is_freed_in_the_kernel_too() -> None:
    """An aborted connection's socket went on offering the kernel's part of its answer to the client (an orphan
    the server no longer counted), for as long as the client kept its window shut: now it is reset."""
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = ask(served, BIG)
        until(served, 1, 5)
        assert served.dropped == ["send_stalled"]
        with pytest.raises(ConnectionResetError):
            while s.recv(1 << 20):
                pass
    finally:
        served.stop()


def test_the_kernel_queue_counts_what_the_kernel_charges() -> None:
    """A client that takes its answer in tiny segments makes the kernel hold each in a buffer of its own: the
    queue costs the host two or three times its bytes, and is counted so, not by its bytes."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.socket()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 88)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        server.setblocking(False)
        assert server.send(b"x" * 50_000) == 50_000
        time.sleep(0.3)
        assert kernel_queue(server) > 2 * 50_000
        server.close()
        client.close()
