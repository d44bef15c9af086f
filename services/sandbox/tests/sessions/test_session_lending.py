"""Cells that sleep leave the CPUs to runs, as runs that sleep do: a cell holds one of the pool's own slots while it
runs (cells and runs compute from one queue), and lending measures the session's worker in that slot's place. So
one client's sessions, each in a cell that sleeps, do not hold every other client's runs back until they wake.

Lent slots are never a cell's: lending bets that what it lends to may sleep, and a run that computes after all
stands paused for the CPUs (never judged for it). Cells lent slots as sleepers that then computed crowded the CPUs
past what runs' wall-time credit covers, and turned other clients' runs TLE.

Nor do cells that sleep hold other cells back: while cells wait for a slot, a running cell seen asleep is paused
and gives its slot to the one that waited longest (``backends/cell_turns.py``); it is continued once it has a
slot again, and cells still compute no more at once than there are slots."""

from __future__ import annotations

import os
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
        assert [a["status"] for a in answers] == ["finished"] * 4, answers
        # The two that waited took the slots of the two asleep (paused, their sleep went on): all four slept at
        # once, not two after two.
        ends = sorted(a["at"] for a in answers)
        assert ends[3] < 1.5 * SLEEP_S, ends
    finally:
        for sid in sids:
            server.delete(f"/v1/sessions/{sid}")


def _sessions(server: TestClient, n: int) -> list[str]:
    sids = []
    for _ in range(n):
        r = server.post("/v1/sessions", json={"language": "python"})
        assert r.status_code == 201, r.text
        sids.append(r.json()["session_id"])
    return sids


def test_a_cell_does_not_wait_for_cells_that_sleep(server: TestClient) -> None:
    # As many sessions as the pool has slots, each in a cell that sleeps near its whole limit (one of them waking
    # to compute 30 ms in every 250, as if to keep its slot: an eighth of a CPU on average): another session's
    # cell is answered at once, not once one of them wakes; the sleepers' time stood still while they were
    # paused, so none is a time-out, and each still slept its whole sleep.
    sleepers, (other,) = _sessions(server, 2), _sessions(server, 1)
    answers: list[dict[str, Any]] = []
    naps = f"while time.monotonic() - t < {SLEEP_S}:\n    time.sleep(0.22)\n    u = time.monotonic()\n"
    naps += "    while time.monotonic() - u < 0.03: pass\n"

    def sleep(sid: str, code: str) -> None:
        body = {"code": f"import time\nt = time.monotonic()\n{code}time.monotonic() - t", "timeout_s": SLEEP_S + 1}
        answers.append(server.post(f"/v1/sessions/{sid}/execute", json=body).json())

    codes = [f"time.sleep({SLEEP_S})\n", naps]
    threads = [threading.Thread(target=sleep, args=(sid, code)) for sid, code in zip(sleepers, codes, strict=True)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)  # both slots held by cells asleep
        sent = time.monotonic()
        cell = server.post(f"/v1/sessions/{other}/execute", json={"code": "6 * 7", "timeout_s": 2}).json()
        took = time.monotonic() - sent
        for t in threads:
            t.join(60)
        assert cell["display"] == "42" and cell["status"] == "finished", cell
        assert took < SLEEP_S / 3, f"the cell waited {took:.1f} s for the cells asleep"
        assert [a["status"] for a in answers] == ["finished"] * 2, answers
        assert all(float(a["display"]) >= SLEEP_S for a in answers), answers
        assert server.app.state.executor.backend.cells_paused >= 1  # type: ignore[attr-defined]
    finally:
        for sid in [*sleepers, other]:
            server.delete(f"/v1/sessions/{sid}")


def test_cells_that_wake_to_compute_take_turns_beside_runs(server: TestClient) -> None:
    # Cells that sleep, are paused for cells that wait, then wake to compute: they compute on the slots, two at a
    # time, never all at once beside the runs; runs that need 0.6 s of their 1 s limit stay AC.
    sids = _sessions(server, 5)
    answers: list[dict[str, Any]] = []
    spin = "import time\ntime.sleep(1)\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n'done'"

    def cell(sid: str) -> None:
        answers.append(server.post(f"/v1/sessions/{sid}/execute", json={"code": spin, "timeout_s": 20}).json())

    threads = [threading.Thread(target=cell, args=(sid,)) for sid in sids]
    run = {
        "language": "python",
        "code": "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\nprint(1)",
        "limits": {"timeout_s": 1},
    }
    try:
        for t in threads:
            t.start()
        time.sleep(1.2)  # they wake about now
        runs = [server.post("/v1/execute", json=run).json() for _ in range(3)]
        for t in threads:
            t.join(60)
        assert [r["verdict"] for r in runs] == ["AC"] * 3, runs
        assert [a["display"] for a in answers] == ["'done'"] * 5, answers
    finally:
        for sid in sids:
            server.delete(f"/v1/sessions/{sid}")


@pytest.mark.skipif(os.geteuid() != 0, reason="forks are the local, podman and docker backends', as root")
def test_copies_of_a_session_asleep_give_their_slots_too(server: TestClient) -> None:
    # A fork's copies share one worker, whose agent passes each copy's frames on: a pause reaches the copy whose
    # cell sleeps. Their processes are measured together, and held to a quarter of a CPU for each slot they
    # hold: one copy waking for a moment every 40 ms (a quarter of a CPU) does not keep both slots.
    (sid,) = _sessions(server, 1)
    r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
    assert r.status_code == 200, r.text
    copies = r.json()["session_ids"]
    (other,) = _sessions(server, 1)
    answers: list[dict[str, Any]] = []
    burn = "t = time.monotonic()\nwhile time.monotonic() - t < 4:\n    u = time.monotonic()\n"
    burn += "    while time.monotonic() - u < 0.01: pass\n    time.sleep(0.03)\n"

    def sleep(copy: str, code: str) -> None:
        body = {"code": f"import time\n{code}'woke'", "timeout_s": 5}
        answers.append(server.post(f"/v1/sessions/{copy}/execute", json=body).json())

    codes = [burn, "time.sleep(4)\n"]
    threads = [threading.Thread(target=sleep, args=(copy, code)) for copy, code in zip(copies, codes, strict=True)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        sent = time.monotonic()
        cell = server.post(f"/v1/sessions/{other}/execute", json={"code": "6 * 7", "timeout_s": 2}).json()
        took = time.monotonic() - sent
        for t in threads:
            t.join(60)
        assert cell["display"] == "42" and took < 2.0, (cell, took)
        assert [(a["display"], a["status"], a["alive"]) for a in answers] == [("'woke'", "finished", True)] * 2
        assert server.app.state.executor.backend.cells_paused >= 1  # type: ignore[attr-defined]
    finally:
        for s in [sid, *copies, other]:
            server.delete(f"/v1/sessions/{s}")


def test_a_pause_that_comes_after_its_cell_leaves_the_session_stopped(server: TestClient) -> None:
    # The server pauses a cell as its answer is on its way: the agent reads the pause (and the resume) after the
    # cell, and drops them; what the cell left running stays stopped until the next cell, which runs as any.
    (sid,) = _sessions(server, 1)
    spin = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "def cpu():\n    f = open(f'/proc/{child.pid}/stat').read().rsplit(')', 1)[1].split()\n"
        "    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')\n"
        "time.sleep(1.0)\nbefore = cpu()\nbefore > 0.05"
    )
    lease = server.app.state.sessions.sessions[sid].lease  # type: ignore[attr-defined]
    try:
        first = server.post(f"/v1/sessions/{sid}/execute", json={"code": spin, "timeout_s": 10}).json()
        assert first["display"] == "True", first
        server.portal.call(lease.pause, True)  # type: ignore[union-attr]
        server.portal.call(lease.pause, False)  # type: ignore[union-attr]
        time.sleep(1.5)  # idle: the child must not compute now
        out = server.post(f"/v1/sessions/{sid}/execute", json={"code": "round(cpu() - before, 2)"}).json()
        assert out["status"] == "finished" and float(out["display"]) < 0.3, out
    finally:
        server.delete(f"/v1/sessions/{sid}")


def test_a_cell_lends_only_a_slot_that_comes_back_in_time(server: TestClient) -> None:
    # A cell paused for another stands paused until that one ends: it lends only to a cell whose limit (with its
    # credit for CPU waits) fits in what it may stand paused (PAUSE_SHARE of its own limit), so its own answer
    # still comes within what its client waits for. A cell of a longer limit waits for a slot, as before.
    sleepers, (long, short) = _sessions(server, 2), _sessions(server, 2)
    backend = server.app.state.executor.backend  # type: ignore[attr-defined]
    answers: list[dict[str, Any]] = []

    def sleep(sid: str) -> None:
        body = {"code": "import time\ntime.sleep(3)\n'woke'", "timeout_s": 4}
        answers.append(server.post(f"/v1/sessions/{sid}/execute", json=body).json())

    threads = [threading.Thread(target=sleep, args=(sid,)) for sid in sleepers]
    try:
        for t in threads:
            t.start()
        time.sleep(0.8)
        paused, sent = backend.cells_paused, time.monotonic()
        cell = server.post(f"/v1/sessions/{long}/execute", json={"code": "6 * 7", "timeout_s": 30}).json()
        assert cell["display"] == "42" and time.monotonic() - sent > 1.5, cell  # it waited for a sleeper's end
        assert backend.cells_paused == paused
        for t in threads:
            t.join(60)
        for t in (threads := [threading.Thread(target=sleep, args=(sid,)) for sid in sleepers]):
            t.start()
        time.sleep(0.8)
        sent = time.monotonic()
        cell = server.post(f"/v1/sessions/{short}/execute", json={"code": "6 * 7", "timeout_s": 2}).json()
        assert cell["display"] == "42" and time.monotonic() - sent < 1.5, cell  # lent a sleeper's slot
        assert backend.cells_paused > paused
        for t in threads:
            t.join(60)
        assert [(a["display"], a["status"]) for a in answers] == [("'woke'", "finished")] * 4, answers
    finally:
        for sid in [*sleepers, long, short]:
            server.delete(f"/v1/sessions/{sid}")


def test_a_cell_whose_session_is_deleted_as_it_waits_for_a_slot_is_told_so(server: TestClient) -> None:
    # Its worker is killed while its call waits for a slot: the call answers that the session is gone (410), not
    # a server error, and the cells that held the slots are not disturbed.
    busy, (doomed,) = _sessions(server, 2), _sessions(server, 1)
    spin = "t = time.process_time()\nwhile time.process_time() - t < 2: pass\n'done'"
    answers: list[dict[str, Any]] = []
    waited: list[Any] = []

    def cell(sid: str, code: str, into: list[Any], limit_s: float = 10) -> None:
        r = server.post(f"/v1/sessions/{sid}/execute", json={"code": f"import time\n{code}", "timeout_s": limit_s})
        into.append(r)

    threads = [threading.Thread(target=cell, args=(sid, spin, answers)) for sid in busy]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)
        # A limit past what the others may lend for: on a loaded machine they compute slowly enough to be seen
        # asleep, and it must wait for a slot, not borrow one.
        waiting = threading.Thread(target=cell, args=(doomed, "1", waited, 30))
        waiting.start()
        time.sleep(0.5)
        assert server.delete(f"/v1/sessions/{doomed}").status_code == 204
        for t in [*threads, waiting]:
            t.join(60)
        assert waited[0].status_code == 410, waited[0].text
        assert [r.json()["display"] for r in answers] == ["'done'"] * 2
    finally:
        for sid in busy:
            server.delete(f"/v1/sessions/{sid}")
