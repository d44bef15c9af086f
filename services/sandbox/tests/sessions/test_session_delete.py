"""A deleted session's end goes on behind its answer (a container's removal takes a tenth of a second), and what it
gives back as it ends (its worker's slot, its memory) is waited for by a session made meanwhile, not refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from codegym_sandbox.backends import session_lease
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for


@pytest.fixture
def slow_ends(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every session's worker ends only once the event is set (as a container's removal takes its time)."""
    ended = threading.Event()
    close = session_lease.SessionLease.close

    async def slow(self: session_lease.SessionLease, busy: bool = False) -> None:
        await asyncio.to_thread(ended.wait, 30)
        await close(self, busy)

    monkeypatch.setattr(session_lease.SessionLease, "close", slow)
    yield ended
    ended.set()


def _server(backend: str, max_sessions: int) -> TestClient:
    settings = settings_for(backend)
    settings.sessions.max_sessions = max_sessions
    settings.sessions.warm = 0  # no kernel started ahead: a session's worker slot is its own, made as it is made
    return TestClient(create_app(settings))


def test_a_delete_is_answered_before_its_worker_has_ended(backend: str, slow_ends: threading.Event) -> None:
    with _server(backend, 4) as client:
        sid = client.post("/v1/sessions", json={}).json()["session_id"]
        store = client.app.state.sessions  # type: ignore[attr-defined]
        assert client.delete(f"/v1/sessions/{sid}").status_code == 204
        assert store._ending  # its worker has not ended: the answer did not wait for it
        r = client.get(f"/v1/sessions/{sid}")
        assert r.status_code == 410 and r.json()["detail"].endswith("was deleted"), r.text
        slow_ends.set()
        deadline = time.monotonic() + 30
        while store._ending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not store._ending


def test_a_session_made_at_the_cap_waits_for_what_a_deleted_one_gives_back(
    backend: str, slow_ends: threading.Event
) -> None:
    with _server(backend, 1) as client:  # one session's worker slot in all
        first = client.post("/v1/sessions", json={}).json()["session_id"]
        assert client.delete(f"/v1/sessions/{first}").status_code == 204
        threading.Timer(0.5, slow_ends.set).start()  # its worker ends half a second later
        started = time.monotonic()
        r = client.post("/v1/sessions", json={})
        assert r.status_code == 201, r.text  # not 429: the slot it waited for came back
        assert time.monotonic() - started >= 0.4
        sid = r.json()["session_id"]
        out = client.post(f"/v1/sessions/{sid}/execute", json={"code": "6 * 7"}).json()
        assert out["display"] == "42", out


def _ipython(client: TestClient, sid: str, code: str) -> dict[str, object]:
    """NeMo-Skills' call: the client names its sessions."""
    body = {"generated_code": code, "std_input": "", "timeout": 10.0, "language": "ipython"}
    r = client.post("/execute", json=body, headers={"X-Session-ID": sid})
    assert r.status_code == 200, r.text
    out: dict[str, object] = r.json()
    return out


def test_a_session_ended_late_never_takes_a_later_one_of_its_name_with_it(backend: str) -> None:
    with _server(backend, 4) as client:
        store = client.app.state.sessions  # type: ignore[attr-defined]
        assert _ipython(client, "k", "x = 1")["new_session_created"] is True
        (old,) = store.sessions.values()
        assert client.delete("/sessions/k", headers={"X-Session-ID": "k"}).status_code == 200
        assert _ipython(client, "k", "x = 2")["new_session_created"] is True  # a new one, under the same name
        # The reaper, holding the old one from a pass that began before the delete, ends it only now.
        client.portal.call(store.end, old, "expired", "expired")  # type: ignore[union-attr]
        out = _ipython(client, "k", "print(x)")
        assert out["stdout"] == "2\n" and out["new_session_created"] is False, out
        assert len(store.sessions) == 1
