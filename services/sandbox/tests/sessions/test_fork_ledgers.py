"""What a fork holds is counted where it is held, however its call ends: the store's caps count what the backend
holds (the memory of a forked kernel, the host user of a family's worker), on the local, podman and docker
backends (as root). Two ledgers of one thing that drift apart let one client hold what the caps think is free:
the budget's memory (every run then waits) or the sessions' slots (another client's session is refused)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from codegym_sandbox.sessions import forks
from codegym_sandbox.sessions.store import SessionStore
from fastapi.testclient import TestClient
from sandbox_support import settings_for


@pytest.fixture
def server(backend: str) -> Iterator[TestClient]:
    if backend not in ("local", "podman", "docker") or os.geteuid() != 0:
        pytest.skip("forks are the local, podman and docker backends', as root")
    settings = settings_for(backend)
    settings.sessions.warm = 0  # no kernel started ahead: the budget holds the sessions' leases alone
    settings.sessions.memory_mb = 64
    settings.sessions.max_sessions = 3
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _new(client: TestClient) -> str:
    r = client.post("/v1/sessions", json={"language": "python"})
    assert r.status_code == 201, r.text
    session_id: str = r.json()["session_id"]
    assert client.post(f"/v1/sessions/{session_id}/execute", json={"code": "x = 1"}).status_code == 200
    return session_id


def _ledgers(client: TestClient) -> tuple[int, int]:
    """What the memory budget holds for sessions (no run is in flight), and what the store counts they hold."""
    store: SessionStore = client.app.state.sessions  # type: ignore[attr-defined]
    held = sum(lease.limit_mb for lease in store.backend.memory.leases())  # type: ignore[attr-defined]
    return held, sum(s.holds_mb for s in store.sessions.values())


def test_a_fork_whose_caller_went_away_is_counted_as_the_budget_holds_it(server: TestClient) -> None:
    """The caller of a fork goes away while the agent copies (a client that closes its connection): the session
    goes on as its copy, and what its kernel held, which the budget holds until the family ends, is counted
    against the caps on the session as after a fork answered."""
    sid = _new(server)
    store: SessionStore = server.app.state.sessions  # type: ignore[attr-defined]
    session = store.sessions[sid]

    async def abandoned(after_s: float) -> bool:
        before = session.lease
        task = asyncio.ensure_future(forks.fork(store, sid, 1, False))
        await asyncio.sleep(after_s)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return session.lease is not before  # the copies were made, the caller gone

    portal: Any = server.portal  # type: ignore[attr-defined]
    # A cancel before the fork reached the agent forks nothing: later each time, until one lands mid-copy.
    delays = [0.001 * 2**i for i in range(12)]
    assert any(portal.call(abandoned, delay) for delay in delays), "no fork was cut off while its copies were made"
    held, counted = _ledgers(server)
    # The kernel's memory and its copy's, and the family's worker's cost (a container's: backends/worker_cost.py).
    assert held == counted == 2 * 64 + store.backend.worker_cost_mb, (held, counted)
    r = server.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
    assert r.status_code == 200 and r.json()["display"] == "1"  # the session goes on, as its copy


def test_a_fork_past_its_time_ends_the_session_and_leaves_nothing_held(
    server: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork with no end held a slot of the pool and its session's lock (which kept it from expiring) for good:
    past its time the session ends, and what it held comes back, its copies too if they are made late."""
    monkeypatch.setattr(forks, "FORK_WALL_S", 0.001)
    sid = _new(server)
    r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
    assert r.status_code == 410 and "not made in" in r.json()["detail"] and r.json()["ran"] is True, r.text
    deadline = time.monotonic() + 30
    while (ledgers := _ledgers(server)) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)  # the session's worker, and the copies the agent made late, end behind the answer
    assert ledgers == (0, 0), ledgers
    for _ in range(3):  # every slot free again
        _new(server)


def test_the_host_user_a_family_keeps_for_a_member_gone_counts_against_the_caps(server: TestClient) -> None:
    """A family keeps its worker's host user (it owns every copy's user namespace) until its last member ends:
    the session that was forked, deleted, is still counted on a member, and the next session past the cap is
    refused (429) before any slot runs out (503)."""
    sid = _new(server)
    r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
    assert r.status_code == 200, r.text
    (copy,) = r.json()["session_ids"]
    assert server.delete(f"/v1/sessions/{sid}").status_code == 204
    _new(server)  # the third slot of three: the family holds two
    r = server.post("/v1/sessions", json={"language": "python"})
    assert r.status_code == 429, r.text
    assert "SESSIONS__MAX_SESSIONS" in r.json()["detail"]
    assert server.delete(f"/v1/sessions/{copy}").status_code == 204  # the family ends: both its slots come back
    deadline = time.monotonic() + 30
    left = 64 + server.app.state.sessions.backend.worker_cost_mb  # type: ignore[attr-defined]  # and its worker's
    while (ledgers := _ledgers(server))[0] != left and time.monotonic() < deadline:
        time.sleep(0.05)  # a deleted session's worker ends behind the answer
    assert ledgers == (left, left), ledgers
    _new(server)


def test_copies_made_and_deleted_leave_nothing_in_their_familys_agent(backend: str, server: TestClient) -> None:
    """The worker's agent of a family holds a descriptor per live member; one kept per copy ever made filled its
    table over a long rollout (a GRPO loop forking 64 a step), until its wait for the members failed and the
    session and every copy of it ended."""
    if backend != "local":
        pytest.skip("a container's agent is no process of the server's: the same agent code is counted on local")
    sid = _new(server)
    store: SessionStore = server.app.state.sessions  # type: ignore[attr-defined]

    def descriptors() -> int:
        return len(os.listdir(f"/proc/{store.sessions[sid].lease.worker.pid}/fd"))  # type: ignore[attr-defined]

    counts = []
    for _ in range(4):
        r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 200, r.text
        for copy in r.json()["session_ids"]:
            assert server.delete(f"/v1/sessions/{copy}").status_code == 204
        deadline = time.monotonic() + 10
        while len(store.backend.session_slots) > 1 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.05)  # the copies' agents ended: their slots are back
        counts.append(descriptors())
    assert counts[-1] == counts[0], counts
    r = server.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
    assert r.status_code == 200 and r.json()["display"] == "1"
