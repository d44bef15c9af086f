"""What a worker (a container) costs the host is charged to the memory budget for the worker's life: the pool's own
workers at start, a lent one while it lives, a session's with its memory limit (``backends/worker_cost.py``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import pytest
from codegym_sandbox.backends.base import RunRequest, SandboxFault
from codegym_sandbox.backends.local import LocalBackend
from codegym_sandbox.backends.worker import AgentWorker
from codegym_sandbox.backends.worker_cost import cost_mb, measure_mb, private_kb
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for
from test_lending import FakePool, FakeWorker, end

COST = 40


class CostlyPool(FakePool):
    least_worker_cost_mb = COST  # as a container backend's
    starts_ahead = False


class KernelWorker(FakeWorker):
    async def open_kernel(self, request: RunRequest) -> None:
        return None


class SessionPool(CostlyPool):
    def make_worker(self, slot: int) -> AgentWorker:
        return KernelWorker(slot, self.fake_runs)


def test_a_container_costs_its_floor_or_what_it_is_measured_to_hold() -> None:
    assert cost_mb(32, 0, []) == 32  # nothing seen: the floor
    assert cost_mb(0, os.getpid(), []) == 0  # no container backend: nothing measured, nothing charged
    measured = measure_mb(os.getpid(), [])
    if measured is not None:  # this process's own cgroup, where this host shows it
        assert cost_mb(1, os.getpid(), []) == max(1, measured)
    assert private_kb(os.getpid()) > 0 and private_kb(0) == 0


def test_the_pools_own_workers_cost_comes_off_the_budget_at_start() -> None:
    async def body(p: FakePool) -> None:
        assert p.worker_cost_mb == COST
        assert p.memory.total_mb == 1000 - 2 * COST
        assert p.status()["worker_cost_mb"] == COST and p.status()["memory_budget_mb"] == 1000 - 2 * COST

    drive_costly(body)


def test_a_lent_worker_holds_its_cost_while_it_lives() -> None:
    async def body(p: FakePool) -> None:
        sleeping = [p.submit(0.0, memory_mb=64)[0] for _ in range(3)]
        for _ in range(4):
            await p.tick()
        lent = [w for w in p._workers[p.size :] if w is not None]
        assert p.running(sleeping) == 3 and len(lent) >= 1
        assert p.memory.held_mb == 3 * 64 + COST * len(lent)
        end(sleeping)
        await asyncio.sleep(0.01)
        assert p.memory.held_mb == COST * len(lent)  # parked, they still cost the host
        for worker in lent:
            p._replace(worker)
        await asyncio.sleep(0.01)
        assert p.memory.held_mb == 0

    drive_costly(body)


def test_no_lent_worker_starts_where_the_budget_has_no_room_for_its_cost() -> None:
    async def body(p: FakePool) -> None:
        sleeping = [p.submit(0.0, memory_mb=300)[0] for _ in range(3)]
        for _ in range(4):
            await p.tick()
        # 1000 - 2 x 40 = 920 MiB: three runs of 300 leave 20, short of a worker's 40.
        assert p.running(sleeping) == 2 and not [w for w in p._workers[p.size :] if w is not None]
        assert p.memory.held_mb == 3 * 300
        end(sleeping)

    drive_costly(body)


def test_a_session_is_charged_its_memory_and_its_workers_cost() -> None:
    async def main() -> None:
        p = SessionPool(2, 4)
        p.memory.total_mb = 1000
        await p.start()
        try:
            request = RunRequest(files={}, argv=[], env={}, limits={})
            lease = await p.open_session(request, 16)
            assert p.memory.held_mb == 16 + COST
            await lease.close(busy=True)
            assert p.memory.held_mb == 0
        finally:
            await p.stop()

    asyncio.run(main())


def test_a_budget_that_cannot_hold_the_workers_refuses_to_start() -> None:
    async def main() -> None:
        p = CostlyPool(2, 4)
        p.memory.total_mb = 2 * COST
        with pytest.raises(SandboxFault, match="cannot hold the 2 workers"):
            await p.start()

    asyncio.run(main())


def test_the_sessions_shares_count_each_sessions_worker_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions hold SESSIONS__MEMORY_SHARE of the budget with their workers' cost: 16 MiB sessions on workers of
    100 MiB are four to a 450 MiB share, not twenty-eight."""
    monkeypatch.setattr(LocalBackend, "least_worker_cost_mb", 100)  # nothing measured on local: the floor
    settings = settings_for("local", workers=1, memory_budget_mb=1000, sessions={"warm": 0, "memory_share": 0.5})
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz").json()
        assert (ready["worker_cost_mb"], ready["memory_budget_mb"]) == (100, 900)
        made = [client.post("/v1/sessions", json={"limits": {"memory_mb": 16}}) for _ in range(4)]
        assert [r.status_code for r in made] == [201, 201, 201, 429], made[-1].text
        assert "SESSIONS__MEMORY_SHARE" in made[-1].json()["detail"]
        assert client.get("/readyz").json()["memory_held_mb"] == 3 * (16 + 100)
        for r in made[:3]:
            assert client.delete(f"/v1/sessions/{r.json()['session_id']}").status_code == 204


def drive_costly(body: Callable[[FakePool], Awaitable[None]]) -> None:
    """Run ``body`` against a started pool of workers that cost ``COST`` each, with a budget of 1000 MiB, whose
    lending ticks the test drives itself."""

    async def main() -> None:
        p = CostlyPool(2, 128)
        p.memory.total_mb = 1000

        async def no_loop() -> None:
            return None

        p._lend = no_loop  # type: ignore[method-assign]
        await p.start()
        try:
            await body(p)
        finally:
            await p.stop()

    asyncio.run(main())
