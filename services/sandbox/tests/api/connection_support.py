"""What the tests of ``api/connections.py`` share: uvicorn on loopback in a thread, serving a plain ASGI app
with the connection bounds (a short deadline, a small bound), and raw sockets to it."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress
from typing import Any

import uvicorn
from codegym_sandbox.api.connections import protocol_class
from starlette.types import Receive, Scope, Send

DEADLINE_S = 1.0
MAX_WAITING = 8


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def sized(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, then answers ``/N`` with N bytes (one write, as a JSON answer is)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    size = int(scope["path"].strip("/") or 2)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(size).encode())]})
    await send({"type": "http.response.body", "body": b"x" * size})


class Served:
    def __init__(self, app: Any = hello, **bounds: Any) -> None:
        self.dropped: list[str] = []
        self.sockets: list[socket.socket] = []
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_level="warning",
            http=protocol_class(DEADLINE_S, MAX_WAITING, self.dropped.append, **bounds),
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

    def connect(self, sent: bytes = b"", receive_buffer: int = 0) -> socket.socket:
        s = socket.socket()
        if receive_buffer:  # before the connection, so that the window it offers is small from the start
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        s.settimeout(5)
        s.connect(("127.0.0.1", self.port))
        self.sockets.append(s)
        if sent:
            s.sendall(sent)
        return s


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


BIG = 16 << 20  # past what the kernel's socket buffers take on loopback: the rest waits in the server's


def taken(s: socket.socket) -> int:
    """Bytes read from ``s`` until the server closes or aborts it (or 5 s pass without any)."""
    got = 0
    with suppress(ConnectionResetError, TimeoutError):
        while data := s.recv(1 << 20):
            got += len(data)
    return got
