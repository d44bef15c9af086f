"""NeMo-Skills' client waits a cell's ``timeout`` for the answer and no longer, then gives up and drops the call,
which would end the session: a cell of theirs is answered within it, whatever other clients' cells do. It never
stands paused to lend its slot to another client's cell that waits (codegym's own cells do: their client waits
for that), and it is interrupted, or not run at all, a moment before the time is up, its session kept. Nor does
it hold its slot asleep: it lends it awake, running on beside the cell it lent it to, so cells of theirs asleep
in every slot hold no other client's cells back."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from codegym_sandbox.sessions.cell_terms import ANSWER_MARGIN_S
from fastapi.testclient import TestClient
from sandbox_support import settings_for


@pytest.fixture
def server(backend: str) -> Iterator[TestClient]:
    # Two slots, as in the cell lending tests (tests/sessions/test_session_lending.py).
    with TestClient(create_app(settings_for(backend, workers=2, max_workers=8)), raise_server_exceptions=False) as c:
        yield c


def nemo(client: TestClient, sid: str, code: str, timeout: float) -> tuple[dict[str, Any], float]:
    """Their client's call (its defaults): the answer, and how long it took."""
    body = {"generated_code": code, "std_input": "", "timeout": timeout, "language": "ipython",
            "max_output_characters": 1000, "traceback_verbosity": "Plain"}  # fmt: skip
    sent = time.monotonic()
    r = client.post("/execute", json=body, headers={"X-Session-ID": sid})
    assert r.status_code == 200, r.text
    return r.json(), time.monotonic() - sent


def native(client: TestClient, spin_s: float, limit_s: float) -> tuple[str, threading.Thread, list[dict[str, Any]]]:
    """A codegym session whose cell computes ``spin_s`` seconds, sent from a thread (started)."""
    r = client.post("/v1/sessions", json={"language": "python"})
    assert r.status_code == 201, r.text
    sid, answers = r.json()["session_id"], []
    code = f"import time\nt = time.monotonic()\nwhile time.monotonic() - t < {spin_s}: pass\n'spun'"
    body = {"code": code, "timeout_s": limit_s}
    thread = threading.Thread(
        target=lambda: answers.append(client.post(f"/v1/sessions/{sid}/execute", json=body).json())
    )
    thread.start()
    return sid, thread, answers


def _paused(client: TestClient) -> int:
    paused: int = client.app.state.executor.backend.cells_paused  # type: ignore[attr-defined]
    return paused


def test_a_cell_asleep_is_never_paused_and_is_answered_within_its_timeout(server: TestClient) -> None:
    sid = str(uuid.uuid4())
    assert nemo(server, sid, "x = 41", 5)[0]["new_session_created"] is True
    paused = _paused(server)
    got: list[tuple[dict[str, Any], float]] = []
    # One slot computes; their cell sleeps in the other while another client's cell waits for a slot, with a limit
    # that fits in what a sleeping cell of a 2 s limit may stand paused (codegym's cells would be paused for it:
    # theirs lends its slot awake, and wakes to compute beside it).
    first, spinning, _ = native(server, 2.5, 10)
    time.sleep(0.3)
    victim = threading.Thread(target=lambda: got.append(nemo(server, sid, "import time\ntime.sleep(1)\nx += 1\nx", 2)))
    victim.start()
    time.sleep(0.3)
    second, waiting, answers = native(server, 1.8, 2)
    try:
        for t in (victim, spinning, waiting):
            t.join(30)
        ((answer, took),) = got
        assert answer == {"new_session_created": False, "process_status": "completed", "stderr": "", "stdout": "42\n"}
        assert took < 2, f"answered {took:.2f} s after the call, past its timeout"
        assert _paused(server) == paused
        assert [a["status"] for a in answers] == ["finished"], answers  # it had the slot once theirs was done
        assert nemo(server, sid, "x", 5)[0] == {"new_session_created": False, "process_status": "completed",
                                                "stderr": "", "stdout": "42\n"}  # fmt: skip
    finally:
        for native_sid in (first, second):
            server.delete(f"/v1/sessions/{native_sid}")
        server.delete(f"/sessions/{sid}")


def test_a_cell_past_its_timeout_is_answered_before_its_client_gives_up(server: TestClient) -> None:
    sid = str(uuid.uuid4())
    try:
        nemo(server, sid, "x = 1", 5)
        answer, took = nemo(server, sid, "import time\nx = 2\ntime.sleep(5)", 1)
        assert answer == {"new_session_created": False, "process_status": "timeout",
                          "stderr": "Execution timed out after 1 seconds\n", "stdout": ""}  # fmt: skip
        assert 1 - ANSWER_MARGIN_S - 0.05 < took < 1, f"answered {took:.2f} s after the call"
        assert nemo(server, sid, "x", 5)[0]["stdout"] == "2\n"  # interrupted, not ended: its state stays
    finally:
        server.delete(f"/sessions/{sid}")


def test_a_cell_whose_time_runs_out_waiting_for_a_slot_is_not_run(server: TestClient) -> None:
    # Both slots compute (no cell asleep lends one): their cell, waiting, is answered a time-out in its time,
    # unrun, its session as it was.
    sid = str(uuid.uuid4())
    nemo(server, sid, "x = 1", 5)
    spins = [native(server, 1.5, 5) for _ in range(2)]
    try:
        time.sleep(0.3)
        answer, took = nemo(server, sid, "x = 2", 0.5)
        assert answer == {"new_session_created": False, "process_status": "timeout",
                          "stderr": "Execution timed out after 0.5 seconds\n", "stdout": ""}  # fmt: skip
        assert took < 0.5, f"answered {took:.2f} s after the call"
        for _, thread, _ in spins:
            thread.join(30)
        assert [a[0]["status"] for _, _, a in spins] == ["finished"] * 2
        assert nemo(server, sid, "x", 5)[0]["stdout"] == "1\n"
    finally:
        for native_sid, _, _ in spins:
            server.delete(f"/v1/sessions/{native_sid}")
        server.delete(f"/sessions/{sid}")


def test_cells_asleep_in_every_slot_hold_no_other_clients_cells(server: TestClient) -> None:
    # One client's cells asleep in both slots, never paused: asleep, each lends its slot awake to a cell that
    # waits, so another client's cells, codegym's and NeMo-Skills', are answered at once, not after the sleeps
    # (nor, for a NeMo cell of a shorter timeout, a time-out unrun).
    other = TestClient(server.app, client=("127.0.0.2", 50000))
    other.portal = server.portal  # the server's event loop, which its workers' streams belong to
    sleepers, victim = [str(uuid.uuid4()) for _ in range(2)], str(uuid.uuid4())
    for sid in sleepers:
        nemo(server, sid, "import time", 5)
    nemo(other, victim, "x = 41", 5)
    r = other.post("/v1/sessions", json={"language": "python"})
    assert r.status_code == 201, r.text
    native_sid = r.json()["session_id"]
    slept: list[tuple[dict[str, Any], float]] = []
    threads = [
        threading.Thread(target=lambda s=sid: slept.append(nemo(server, s, "time.sleep(4)", 5))) for sid in sleepers
    ]
    got: dict[str, tuple[Any, float]] = {}

    def native_cell() -> None:
        sent = time.monotonic()
        body = {"code": "6 * 7", "timeout_s": 5}
        got["native"] = (other.post(f"/v1/sessions/{native_sid}/execute", json=body).json(), time.monotonic() - sent)

    def nemo_cell() -> None:
        got["nemo"] = nemo(other, victim, "x += 1\nx", 2)  # a timeout shorter than the sleeps

    victims = [threading.Thread(target=native_cell), threading.Thread(target=nemo_cell)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)  # both slots held by cells asleep
        for t in victims:
            t.start()
        for t in victims:
            t.join(30)
        (cell, took), (answer, waited) = got["native"], got["nemo"]
        assert cell["display"] == "42" and took < 1.5, (cell, took)
        assert answer["process_status"] == "completed" and answer["stdout"] == "42\n", answer
        assert waited < 1.5, waited
        backend = server.app.state.executor.backend  # type: ignore[attr-defined]
        assert backend.cells_lent_awake >= 1 and _paused(server) == 0  # lent awake, never paused
        for t in threads:
            t.join(30)
        assert [a["process_status"] for a, _ in slept] == ["completed"] * 2, slept
    finally:
        other.delete(f"/v1/sessions/{native_sid}")
        other.delete(f"/sessions/{victim}")
        for sid in sleepers:
            server.delete(f"/sessions/{sid}")
