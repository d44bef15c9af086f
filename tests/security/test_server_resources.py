"""What a client can make the server hold after it has gone: queued and running runs, workers.

A client that disconnects gets its runs cancelled: queued ones leave the queue, running ones have their
worker replaced, and nothing of them reaches the result cache. The next client is served at once. (The
result cache's byte bound is tested in-process, in ``services/sandbox/tests/test_cache.py``.)
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import HOST, ServerProcess

from .suite import settings_for

SLEEPER = "import time\ntime.sleep(30)\n"  # far longer than the test: only a cancellation ends it in time


@pytest.fixture()
def server(backend: str) -> Iterator[ServerProcess]:
    """A server with two workers on ``backend`` (skipped loudly where it cannot run), and no more: these tests
    count workers, restarts and queued runs of a fixed pool (lending has tests of its own)."""
    image = settings_for(backend).image
    env = {
        "CODEGYM_SANDBOX_BACKEND": backend,
        "CODEGYM_SANDBOX_WORKERS": "2",
        "CODEGYM_SANDBOX_MAX_WORKERS": "2",
        "CODEGYM_SANDBOX_IMAGE": image,
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start(ready_timeout=120)
    try:
        yield server
    finally:
        server.stop()


def _open_request(server: ServerProcess, path: str, body: dict[str, Any]) -> socket.socket:
    """A request sent whole on a connection of its own, whose answer is never read."""
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(data)}\r\n\r\n"
    sock = socket.create_connection((HOST, server.port))
    sock.sendall(head.encode() + data)
    return sock


def _metric(server: ServerProcess, sample: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{sample} not in metrics")


def _until(what: str, check: Callable[[dict[str, Any]], bool], server: ServerProcess, within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not check(status := httpx.get(f"{server.url}/readyz").json()):
        assert time.monotonic() < deadline, f"never {what}: {status}"
        time.sleep(0.05)


def _started_by(agents: list[int]) -> set[int]:
    return set().union(*(_descendants(a) for a in agents))


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            children.setdefault(int(stat[1]), []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _stat(pid: int) -> list[str] | None:
    """State and parent of a process, None when it is gone (a zombie has gone: nobody may have reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[:2]


def test_runs_of_a_client_that_went_away_are_cancelled(server: ServerProcess, backend: str) -> None:
    limits = {"timeout_s": 60}
    # Both workers run a request of each answer path (the whole-answer cache of /run_code, and the steps),
    # then a group of three runs (two batches: one per worker) waits in the queue behind them.
    running = [
        _open_request(server, "/run_code", {"language": "python", "code": SLEEPER, "run_timeout": 60}),
        _open_request(server, "/v1/execute", {"language": "python", "code": SLEEPER, "limits": limits}),
    ]
    _until("both workers busy", lambda s: s["busy"] == 2, server)
    tests = [{"stdin": str(i), "expected_stdout": ""} for i in range(3)]
    group = {"language": "python", "programs": [SLEEPER], "tests": tests, "limits": limits}
    queued = _open_request(server, "/v1/evaluate", group)
    _until("the group queued", lambda s: s["queued"] == 2, server)
    agents = server.agents()  # local agents; a container backend's agents are in its containers
    started_by_agents = _started_by(agents)  # their boxes, and the programs in the boxes

    for sock in [*running, queued]:
        sock.close()
    started = time.monotonic()
    answer = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(6 * 7)"}, timeout=60)
    waited = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["run"]["stdout"] == "42\n", answer.text
    # Behind the abandoned runs it would wait 60 s; a replaced worker starts in about a second.
    assert waited < 10, f"the next request waited {waited:.1f} s"

    assert _metric(server, "codegym_sandbox_abandoned_requests_total") == 3
    assert _metric(server, "codegym_sandbox_cancelled_runs_total") == 5  # 1 + 1 + 3 tests
    # Nothing of a cancelled run is cached: the one entry of each store is the answer just given.
    assert _metric(server, 'codegym_sandbox_cache_entries{store="steps"}') == 1
    assert _metric(server, 'codegym_sandbox_cache_entries{store="answers"}') == 0
    # The two agents that held the sleepers were killed and replaced: no slot leaked, none is broken.
    _until("the pool whole", lambda s: s["alive"] == 2 and s["busy"] == 0 and s["queued"] == 0, server)
    status = httpx.get(f"{server.url}/readyz").json()
    assert status["restarts"] == 2 and status["broken_slots"] == [], status
    if backend == "local":
        assert len(set(agents) - set(server.agents())) == 2
        deadline = time.monotonic() + 5  # a box dies with its agent, and everything in the box with the box
        while left := {p for p in started_by_agents if _stat(p) is not None} - _started_by(server.agents()):
            assert time.monotonic() < deadline, f"processes of the cancelled runs still there: {sorted(left)}"
            time.sleep(0.05)
    for i in range(4):  # and every slot serves right answers again
        again = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": f"print({i} * 2)"})
        assert again.json()["run"]["stdout"] == f"{i * 2}\n", again.text
