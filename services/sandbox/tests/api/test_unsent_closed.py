"""Answers still in the kernel's queue when their connection closes (``api/connections.py``, ``api/unsent.py``), on
real sockets: kept and watched until their client has taken them, or reset; never left to the kernel uncounted."""

from __future__ import annotations

import socket
import time

import pytest
from codegym_sandbox.api.unsent import bound_socket
from connection_support import Served, sized

SIZE = 100_000  # an answer the kernel's queue takes whole: the server's buffer never holds any of it
_STATES = {"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "08": "CLOSE_WAIT"}


def ends(client: socket.socket) -> tuple[int, int]:
    """The ports of ``client``'s connection: its own, the server's (a connection reset has neither to tell)."""
    return client.getsockname()[1], client.getpeername()[1]


def server_side(client: tuple[int, int]) -> set[str]:
    """The states of the server's end of ``client``'s connection, as ``/proc/net/tcp`` lists them (none once the
    kernel has freed it)."""
    mine, theirs = client
    states = set()
    with open("/proc/net/tcp") as table:
        for line in table.read().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            if int(local.split(":")[1], 16) == theirs and int(remote.split(":")[1], 16) == mine:
                states.add(_STATES.get(state, state))
    return states


def ask_and_close(served: Served, size: int, version: bytes = b"1.1") -> socket.socket:
    close = b"Connection: close\r\n" if version == b"1.1" else b""
    head = b"GET /%d HTTP/%s\r\nHost: localhost\r\n%s\r\n" % (size, version, close)
    return served.connect(head, receive_buffer=4096)


@pytest.mark.parametrize("version", [b"1.1", b"1.0"])
def test_an_unread_answer_of_a_closed_connection_is_watched_then_reset(version: bytes) -> None:
    """Closed after its answer (``Connection: close``, HTTP/1.0), a connection whose answer the kernel had taken
    whole was left to the kernel: an orphan in FIN-WAIT-1 that held the answer (and more, in the kernel's
    bookkeeping) for as long as its client answered the kernel's probes, counted by nothing."""
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = ask_and_close(served, SIZE, version)
        connection = ends(s)
        deadline = time.monotonic() + 5
        while not served.dropped and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.dropped == ["send_stalled"]
        assert server_side(connection) == set()
        with pytest.raises(ConnectionResetError):
            while s.recv(1 << 20):
                pass
    finally:
        served.stop()


@pytest.mark.parametrize("size", [SIZE, 2 << 20])
def test_a_client_that_reads_gets_its_whole_answer_and_its_end(size: int) -> None:
    """A kept connection is closed, not reset, once its client has taken all of it: the client reads the whole
    answer after the server is done with it, then its end."""
    served = Served(sized, send_stall_s=1.0).start()
    try:
        s = ask_and_close(served, size)
        connection = ends(s)
        time.sleep(0.5)
        got = b""
        while data := s.recv(1 << 16):
            got += data
        assert got.startswith(b"HTTP/1.1 200 OK") and got.endswith(b"x" * size) and served.dropped == []
        time.sleep(0.5)
        assert server_side(connection) <= {"FIN_WAIT2", "TIME_WAIT"}
    finally:
        served.stop()


def test_kept_connections_wait_among_the_connections_that_wait() -> None:
    """Kept connections count in the bound of connections waiting for their clients: past it, the one that has
    waited longest goes, reset (else each would hold a descriptor of the server's for a stall at least)."""
    served = Served(sized, send_stall_s=30.0).start()
    try:
        clients = []
        for _ in range(16):  # twice the bound
            clients.append(ends(ask_and_close(served, SIZE)))
            time.sleep(0.1)
        time.sleep(0.2)
        assert served.dropped.count("crowded") >= 4
        assert sum(server_side(s) == set() for s in clients) == served.dropped.count("crowded")
    finally:
        served.stop()


def test_the_kernel_ends_a_connection_whose_client_keeps_its_window_shut() -> None:
    """A socket the server no longer holds (closed by the server's exit, say) with a queue its client never takes:
    the kernel ends it after twice the stall, though its client answers every probe of its window."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
        bound_socket(server, 0.25)
        server.setblocking(False)
        try:
            while True:
                server.send(b"x" * 65536)
        except BlockingIOError:
            pass
        connection = ends(client)
        server.close()
        assert server_side(connection) == {"FIN_WAIT1"}
        deadline = time.monotonic() + 5
        while server_side(connection) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server_side(connection) == set()
        client.close()
