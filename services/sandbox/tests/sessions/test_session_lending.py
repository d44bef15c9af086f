"""Cells that sleep leave the CPUs to runs, as runs that sleep do: a cell holds one of the pool's own slots while it
runs (cells and runs compute from one queue), and lending measures the session's worker in that slot's place. So
one client's sessions, each in a cell that sleeps, do not hold every other client's runs back until they wake.

Lent slots are never a cell's: lending bets that what it lends to may sleep, and a run that computes after all
gives way (it is run again, never judged for it); a cell cannot be run again. Cells lent slots as sleepers that
then computed crowded the CPUs past what runs' wall-time credit covers, and turned other clients' runs TLE."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for

SLEEP_S = 6.0


@pytest.fixture
def server(backend: str) -> Iterator[TestClient]:
    # On the local backend the pool lends on what a worker's processes run, which it sees; a container's are not
    # the server's children, and lending there goes by the CPUs' idle time, which a sleeping cell leaves too.
    settings = settings_for(backend, workers=2, max_workers=8, reserve_workers=2)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def test_cells_that_sleep_do_not_hold_runs_back(server: TestClient) -> None:
    sids = []
    for _ in range(4):  # twice the pool's own slots
        r = server.post("/v1/sessions", json={"language": "python"})
        assert r.status_code == 201, r.text
        sids.append(r.json()["session_id"])
    answers: list[dict[str, Any]] = []
    began = time.monotonic()

    def sleep(sid: str) -> None:
        body = {"code": f"import time\ntime.sleep({SLEEP_S})\n'woke'", "timeout_s": 30}
        answers.append({**server.post(f"/v1/sessions/{sid}/execute", json=body).json(), "at": time.monotonic() - began})

    threads = [threading.Thread(target=sleep, args=(sid,)) for sid in sids]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)  # two cells hold the pool's own slots now, asleep; two wait for them
        sent = time.monotonic()
        run = server.post("/v1/execute", json={"language": "python", "code": "print(1)"}).json()
        took = time.monotonic() - sent
        for t in threads:
            t.join(60)
        assert run["verdict"] == "AC" and run["run"]["stdout"] == "1\n", run
        # Answered while the cells slept (they wake SLEEP_S - 1 s after it was sent), on a lent slot.
        assert took < SLEEP_S / 2, f"the run waited {took:.1f} s for the sleeping cells"
        assert [a["display"] for a in answers] == ["'woke'"] * 4, answers
        # Two at a time, on the pool's two own slots: the two that waited were not lent a slot.
        ends = sorted(a["at"] for a in answers)
        assert ends[1] < 1.5 * SLEEP_S <= ends[2], ends
    finally:
        for sid in sids:
            server.delete(f"/v1/sessions/{sid}")
