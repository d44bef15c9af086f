"""Clients take turns at the pool's workers, on a real server: where lending adds no worker (the CPUs are busy,
as on the container backends under any other load), one client's request of many runs holds every worker and the
rest of its window waits; another client's run, or its session's cell, is served after at most one of the first
client's runs per worker, not after all of them (``backends/client_turns.py``)."""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too

WORKERS = 1
RUNS = 6  # the first client's programs: each computes for BUSY_S, so nothing is lent beside them
BUSY_S = 0.4
FIRST, OTHER = "127.0.0.1", "127.0.0.2"
STARTED = "import time\nstarted = time.time()\n"  # a program that prints when it began


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # One CPU for the server and its workers: the first client's computing runs keep it busy, so lending (which
    # lends only while the CPUs sit idle) adds no worker, as on a container backend whose host has other load.
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})
    try:
        env = {"CODEGYM_SANDBOX_BACKEND": "local", "CODEGYM_SANDBOX_RESERVE_WORKERS": "0"}
        served = ServerProcess(env, ["--workers", str(WORKERS), "--log-level", "warning"]).start()
    finally:
        os.sched_setaffinity(0, mine)
    try:
        yield served
    finally:
        served.stop()


def _post(server: ServerProcess, source: str, path: str, body: dict[str, Any]) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60, source_address=(source, 0))
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        answer = conn.getresponse()
        data = answer.read()
        assert answer.status in (200, 201), (answer.status, data[:500])
        return json.loads(data)
    finally:
        conn.close()


def _ready(server: ServerProcess) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/readyz")
        return json.loads(conn.getresponse().read())  # type: ignore[no-any-return]
    finally:
        conn.close()


def _ahead(server: ServerProcess, served: Any) -> tuple[int, int, list[float]]:
    """FIRST sends one request of RUNS computing programs; once its runs wait, ``served()`` (OTHER's call, which
    answers when its program began) is called. How many of FIRST's runs began while OTHER's waited, how many
    runs were lent a worker meanwhile (lending may still lend a moment, which a cell never takes), and for the
    record when each of FIRST's began after OTHER's call was sent."""
    programs = [f"{STARTED}while time.time() < started + {BUSY_S}: pass\nprint(repr(started))  # {i}"
                for i in range(RUNS)]  # fmt: skip
    body = {"language": "python", "programs": programs, "tests": [{"stdin": "", "expected_stdout": ""}],
            "cache": False, "limits": {"timeout_s": 20}}  # fmt: skip
    answer: list[Any] = []
    first = threading.Thread(target=lambda: answer.append(_post(server, FIRST, "/v1/evaluate", body)))
    first.start()
    try:
        deadline = time.monotonic() + 30
        while not ((state := _ready(server))["busy"] >= WORKERS and state["queued"] >= RUNS // 2):
            assert time.monotonic() < deadline, state
            time.sleep(0.02)
        lent, sent = state["lent"], time.time()
        began = served()
        lent = _ready(server)["lent"] - lent
    finally:
        first.join(60)
    starts = sorted(float(program["tests"][0]["stdout"]) - sent for program in answer[0]["results"])
    return sum(0 < s < began - sent for s in starts), lent, starts


def test_another_clients_run_waits_for_one_run_per_worker_not_for_the_backlog(server: ServerProcess) -> None:
    def served() -> float:
        ran = _post(server, OTHER, "/v1/execute", {"language": "python", "code": f"{STARTED}print(repr(started))",
                                                    "cache": False})  # fmt: skip
        return float(ran["run"]["stdout"])

    ahead, lent, starts = _ahead(server, served)
    assert ahead <= WORKERS + lent, (ahead, lent, starts)  # not the whole backlog: RUNS - 1 of them


def test_another_clients_cell_waits_for_one_run_per_worker_not_for_the_backlog(server: ServerProcess) -> None:
    session = _post(server, OTHER, "/v1/sessions", {"language": "python", "ttl_s": 60})["session_id"]

    def served() -> float:
        cell = _post(server, OTHER, f"/v1/sessions/{session}/execute", {"code": f"{STARTED}print(repr(started))"})
        return float(cell["stdout"])

    ahead, lent, starts = _ahead(server, served)
    assert ahead <= WORKERS + lent, (ahead, lent, starts)
