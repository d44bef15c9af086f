"""Servers the CLI starts on loopback: start, readiness, failure messages, stop."""

from __future__ import annotations

import socket
import sys

import httpx
import pytest
from codegym_evaluator.servers import LoopbackServer, ServerError, free_port, sandbox_server


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_sandbox_server_starts_answers_and_stops() -> None:
    with sandbox_server(workers=1) as server:
        assert server.url.startswith("http://127.0.0.1:")
        r = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(6 * 7)"})
        assert r.json()["run"]["stdout"] == "42\n"
    assert not listening(server.port)


def test_a_server_that_dies_while_starting_says_why() -> None:
    argv = [sys.executable, "-c", "import sys; print('cannot load the model'); sys.exit(3)"]
    with pytest.raises(ServerError, match=r"(?s)demo exited with 3 while starting:.*cannot load the model"):
        LoopbackServer("demo", argv, free_port(), "/").start()


def test_a_server_that_never_answers_is_stopped() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    server = LoopbackServer("silent", argv, free_port(), "/", start_timeout_s=1.0)
    with pytest.raises(ServerError, match="silent did not answer within 1s"):
        server.start()
    assert server._proc is None
