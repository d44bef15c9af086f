"""The memory budget: the sum of the memory limits of the runs in flight stays within it.

First the budget on its own and on a pool of fake workers (see ``test_lending.py``), then a real server on
the local backend with a small budget: a run waits for its share, is refused like any run that waited too
long (504 on /run_code, with Retry-After), and one that asks for more than the whole budget gets a 422.
"""

from __future__ import annotations

import asyncio
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from codegym_sandbox.backends.base import RunPolicy, RunRequest, Saturated, TooLarge
from codegym_sandbox.backends.lending import LEND_PER_CPU
from codegym_sandbox.backends.memory import MemoryBudget, default_budget_mb, machine_memory_mb, server_held_mb
from codegym_sandbox.config import Limits, Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from test_lending import FakePool, drive, end


def test_the_default_budget_is_the_machine_less_a_margin() -> None:
    total = machine_memory_mb()
    assert total > 0
    assert 0 < default_budget_mb() <= total - min(1024, total // 2)


def test_runs_share_the_budget_first_come_first_served() -> None:
    async def main() -> None:
        budget = MemoryBudget(1000)
        first = await budget.acquire(600, client="c")  # a client's runs (the server's own are passed over: below)
        order: list[int] = []

        async def take(mb: int) -> None:
            await budget.acquire(mb, client="c")
            order.append(mb)

        big = asyncio.create_task(take(900))
        await asyncio.sleep(0)
        small = asyncio.create_task(take(100))  # would fit now, but waits behind the earlier run
        await asyncio.sleep(0.01)
        assert order == [] and budget.waiting == 2 and budget.held_mb == 600
        budget.release(first)
        await asyncio.gather(big, small)
        assert order == [900, 100] and budget.held_mb == 1000

    asyncio.run(main())


def test_runs_waiting_for_memory_are_granted_it_client_by_client() -> None:
    """One client's backlog waited ahead of every other client's run, which never reached the workers' turns: the
    budget goes to the waiting client that holds the fewest leases, then the one served longest ago."""

    async def main() -> None:
        budget = MemoryBudget(300)
        held = [await budget.acquire(100, client="busy") for _ in range(3)]
        order: list[str] = []

        async def take(client: str) -> None:
            await budget.acquire(100, client=client)
            order.append(client)

        backlog = [asyncio.create_task(take("busy")) for _ in range(3)]
        await asyncio.sleep(0.01)
        late = asyncio.create_task(take("other"))  # came after the busy client's three
        await asyncio.sleep(0.01)
        budget.release(held[0])
        await asyncio.sleep(0.01)
        assert order == ["other"]  # it holds none: its turn before the busy client's backlog
        budget.release(held[1])
        budget.release(held[2])
        await asyncio.sleep(0.01)
        assert order == ["other", "busy", "busy"] and budget.waiting == 1
        for lease in budget.leases():
            budget.release(lease)
        await asyncio.gather(*backlog, late)
        assert order == ["other", "busy", "busy", "busy"]
        # What the server takes for itself (sessions' memory, a container's cost) is of no client: however much of
        # it is held, what it waits for is first, never last behind every client that holds less.
        for lease in budget.leases():
            budget.release(lease)
        sessions = [await budget.acquire(50) for _ in range(4)]
        busy = await budget.acquire(100, client="busy")
        order.clear()
        behind = asyncio.create_task(take("busy"))
        await asyncio.sleep(0.01)
        session = asyncio.create_task(take(""))
        await asyncio.sleep(0.01)
        budget.release(busy)
        await asyncio.sleep(0.01)
        assert order == [""], order
        budget.release(sessions[0])
        budget.release(sessions[1])
        await asyncio.gather(behind, session)
        assert order == ["", "busy"]
        # A client whose turn it is takes what fits at once, though another client's larger run waits.
        for lease in budget.leases():
            budget.release(lease)
        await budget.acquire(250, client="busy")
        larger = asyncio.create_task(budget.acquire(100, client="busy"))  # 350 of 300: it waits
        await asyncio.sleep(0.01)
        await asyncio.wait_for(budget.acquire(50, client="new"), 1)  # its turn first (it holds none), and fits
        larger.cancel()
        await asyncio.gather(larger, return_exceptions=True)

    asyncio.run(main())


def test_a_run_that_waits_too_long_or_leaves_gives_its_place_back() -> None:
    async def main() -> None:
        budget = MemoryBudget(1000)
        await budget.acquire(800)
        with pytest.raises(Saturated):
            await budget.acquire(500, wait_s=0.05)
        gone = asyncio.create_task(budget.acquire(500))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        assert budget.waiting == 0 and budget.held_mb == 800
        await budget.acquire(200)  # nothing of the two is held
        with pytest.raises(TooLarge, match="more than this server's whole memory budget"):
            await budget.acquire(1001)

    asyncio.run(main())


@pytest.mark.parametrize(("budget_mb", "run_mb", "at_once"), [(300, 100, 3), (1000, 256, 3), (2048, 64, 32)])
def test_the_pool_runs_no_more_than_the_budget_holds(budget_mb: int, run_mb: int, at_once: int) -> None:
    """Sleepers on a pool with workers to spare: memory, not workers or CPUs, bounds the runs in flight."""

    async def body(p: FakePool) -> None:
        p.memory.total_mb = budget_mb
        runs = [p.submit(0.0, memory_mb=run_mb)[0] for _ in range(at_once + 5)]
        for _ in range(2 + 2 * math.ceil(at_once / (LEND_PER_CPU * p.cpus))):  # each step of lending seen idle twice
            await p.tick()
            assert p.running(runs) <= at_once and p.memory.held_mb <= budget_mb
        assert p.running(runs) == at_once and p.status()["memory_held_mb"] == at_once * run_mb
        end(runs[:2])
        await p.tick()
        await p.tick()
        assert p.running(runs) == at_once  # the next two took their places
        end(runs)
        await asyncio.sleep(0.01)
        assert p.memory.held_mb == 0

    drive(body, workers=2, max_workers=64)


def test_a_run_that_cannot_fit_beside_what_the_server_holds_for_itself_holds_no_one_back() -> None:
    """Round 56: idle sessions held half the budget, and a run of the largest limit, first in turn (its client
    held nothing), fitted only once they ended: no other client's run was admitted for as long as they lived, the
    budget half free. Such a run is passed over until it could fit; one that fits once the runs in flight end is
    not (it would wait for ever behind smaller ones)."""

    async def main() -> None:
        budget = MemoryBudget(1000)
        sessions = [await budget.acquire(350) for _ in range(2)]  # the server's own: 700
        large = asyncio.create_task(budget.acquire(500, client="large"))
        await asyncio.sleep(0.01)
        # 700 + 500 > 1000 whatever runs end: another client's run goes, though the large one is first in turn.
        small = await asyncio.wait_for(budget.acquire(200, client="small"), 1)
        assert not large.done() and budget.held_mb == 900
        budget.release(sessions[0])  # 350 + 500 fits once the small run ends: from now on no run passes it
        await asyncio.sleep(0.01)
        behind = asyncio.create_task(budget.acquire(100, client="other"))
        await asyncio.sleep(0.01)
        assert not large.done() and not behind.done() and budget.held_mb == 550
        budget.release(small)  # the large run first, then the one behind it
        granted, after = await asyncio.wait_for(asyncio.gather(large, behind), 1)
        assert (granted.limit_mb, after.limit_mb) == (500, 100) and granted.order < after.order
        assert budget.held_mb == 950 and budget.waiting == 0

    asyncio.run(main())


def test_a_clients_run_that_cannot_fit_beside_the_servers_own_holds_back_none_of_its_later_runs() -> None:
    """Round 57: the pass-over looked at each client's first run alone, so a client's run of the largest limit
    beside idle sessions (another client's) held every later run of that client for as long as they lived."""

    async def main() -> None:
        budget = MemoryBudget(1000)
        sessions = [await budget.acquire(300) for _ in range(2)]  # the server's own: 600
        large = asyncio.create_task(budget.acquire(500, client="a"))
        await asyncio.sleep(0.01)
        small = await asyncio.wait_for(budget.acquire(100, client="a"), 1)  # the same client's, after it
        assert not large.done() and budget.held_mb == 700
        budget.release(small)
        budget.release(sessions[0])  # 300 + 500 fits now: the large run goes
        granted = await asyncio.wait_for(large, 1)
        assert granted.limit_mb == 500 and budget.held_mb == 800 and budget.waiting == 0

    asyncio.run(main())


def test_the_budgets_sums_stay_those_of_its_leases_as_they_come_change_give_way_and_go() -> None:
    """The budget keeps its sums as leases change rather than adding them up again (a server's sessions each hold
    one for their life, and every run and memory tick read the sums): after any sequence of grants, updates,
    pauses, resumptions and releases they are what adding up the leases gives."""
    import random

    rng = random.Random(7)

    async def scenario() -> None:
        budget = MemoryBudget(4096)
        live = []
        for _ in range(3000):
            step = rng.random()
            if step < 0.35 or not live:
                mb = rng.choice([48, 256, 1024])
                share = rng.choice([None, 64])
                try:
                    live.append(await budget.acquire(mb, 0.0, share, rng.choice([0, 1, 9]), rng.choice(["", "a"])))
                except Saturated:
                    pass
            elif step < 0.7:
                budget.update(rng.choice(live), rng.choice([None, 0, 10, 100, 700, 2000]))
            elif step < 0.75:
                budget.over()
            elif step < 0.8:
                budget.resumable(rng.choice([0, 1]))
            else:
                budget.release(live.pop(rng.randrange(len(live))))
            leases = budget.leases()
            assert budget.held_mb == sum(lease.charge_mb for lease in leases)
            assert budget._own == sum(lease.charge_mb for lease in leases if not lease.client)
            ceiling = sum(lease.limit_mb + lease.extra_mb for lease in leases)
            assert budget.overcommitted == (ceiling > budget.total_mb)
            assert budget.paused == sum(lease.paused for lease in leases)
            assert not any(lease.paused and lease.full for lease in leases)
            if budget.held_mb <= budget.total_mb:
                assert budget.over() == []

    asyncio.run(scenario())


def test_a_run_larger_than_the_whole_budget_is_refused_at_once() -> None:
    async def body(p: FakePool) -> None:
        p.memory.total_mb = 300
        _, task = p.submit(0.0, memory_mb=301)
        with pytest.raises(TooLarge):
            await task
        first, _ = p.submit(0.0, memory_mb=200)
        _, waiting = p.submit(0.0, memory_mb=200, policy=RunPolicy(queue_wait_s=0.1))
        with pytest.raises(Saturated):
            await waiting
        end([first])

    drive(body)


def _server(budget_mb: int) -> TestClient:
    limits = Limits(memory_mb=128, max_memory_mb=1024)
    settings = Settings(
        backend="local",
        workers=2,
        max_workers=8,
        memory_budget_mb=budget_mb,
        limits=limits,
        fusion_queue_wait_s=0.5,
        cache_entries=0,
    )
    return TestClient(create_app(settings))


def test_a_request_whose_run_asks_for_more_than_the_budget_gets_422() -> None:
    with _server(300) as client:
        body = {"language": "python", "code": "print(1)", "limits": {"memory_mb": 512}}
        answer = client.post("/v1/execute", json=body)
        assert answer.status_code == 422 and "memory budget (300 MiB" in answer.json()["detail"], answer.text
        fusion = client.post("/run_code", json={"language": "python", "code": "print(1)", "memory_limit_MB": 512})
        assert fusion.status_code == 422, fusion.text
        assert client.post("/v1/execute", json={**body, "limits": {"memory_mb": 256}}).json()["verdict"] == "AC"
        assert client.get("/readyz").json()["memory_budget_mb"] == 300


def test_a_run_that_waits_for_memory_past_the_queue_limit_gets_504_with_retry_after() -> None:
    """Two workers, but memory for one run that holds 250 MiB: the second waits for it (the first holds what is
    left of the budget, though it was admitted by a small share), and /run_code's wait is bounded."""
    with _server(300) as client:
        code = "import time; held = b'x' * (250 << 20); time.sleep(2.5); print('slept')"
        req = {"language": "python", "code": code, "memory_limit_MB": 290}
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.post, "/run_code", json=req)
            time.sleep(1.2)  # the first run holds its memory, and the pool has read it (QUIET_TICK_S)
            second = pool.submit(client.post, "/run_code", json={**req, "code": "print(1)"}).result(timeout=30)
            assert first.result(timeout=30).json()["run_result"]["stdout"] == "slept\n"
        assert second.status_code == 504 and second.headers["retry-after"] == "1", second.text
        small = {"language": "python", "code": "print('fits')", "memory_limit_MB": 100}
        assert client.post("/run_code", json=small).json()["run_result"]["stdout"] == "fits\n"


def test_runs_waiting_for_memory_fill_the_queue_as_runs_waiting_for_a_worker_do() -> None:
    """Workers to spare, memory for one run: past ``queue_size`` runs waiting for memory, the next is refused."""

    async def body(p: FakePool) -> None:
        p.memory.total_mb = 100
        first, _ = p.submit(0.0, memory_mb=100)
        waiting = [p.submit(0.0, memory_mb=100) for _ in range(2)]
        await asyncio.sleep(0.01)
        assert p.waiting == 2 and p.status()["queued"] == 2
        _, refused = p.submit(0.0, memory_mb=100)
        with pytest.raises(Saturated):
            await asyncio.wait_for(refused, 5)  # refused at once, never left to wait
        end([first, *(run for run, _ in waiting)])
        await asyncio.gather(*(task for _, task in waiting))

    drive(body, queue_size=2)


def test_what_the_server_holds_for_a_run_is_in_the_budget() -> None:
    """Issue 32, family 6: the outputs an exchange may bring back, its inputs and files, are the server's
    memory, charged beside the run's own from its admission to its end."""
    limits: Any = {"output_bytes": 8 << 20}
    request = RunRequest(files={"main.py": (b"x" * (1 << 20), 0o644)}, argv=[], env={}, limits=limits)
    # 16 tests' outputs of 8 MiB, 16 inputs of 256 KiB, a file of 1 MiB and its inode (a KiB: one MiB more).
    assert server_held_mb(request, [b"y" * (256 << 10)] * 16) == 16 * 8 + 4 + 2
    # Files are what the kernel holds for them: a page each, and an inode for each file and directory.
    tree = RunRequest(files={f"d{i}/f": (b"x", 0o644) for i in range(1024)}, argv=[], env={}, limits={})
    assert server_held_mb(tree, []) == 4 + 2

    async def main() -> None:
        budget = MemoryBudget(300)
        lease = await budget.acquire(100, extra_mb=150)
        assert budget.held_mb == 250
        budget.update(lease, 120)  # the run grew: the server's part is still charged
        assert budget.held_mb == 270
        with pytest.raises(Saturated):
            await budget.acquire(40, wait_s=0.05)
        budget.release(lease)
        assert budget.held_mb == 0
        with pytest.raises(TooLarge, match="and 250 MiB the server holds for it"):
            await budget.acquire(100, extra_mb=250)

    asyncio.run(main())


def test_the_agent_says_as_each_test_of_an_exchange_ends_and_the_budget_hears_it_of_the_exchanges_lease() -> None:
    """The real agent's word between tests reaches the budget (``MemoryBudget.anew``: see ``test_run_pauses.py``)
    while the exchange is in flight, once for each test but the last; a single run says nothing."""
    with _server(300) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        heard: list[tuple[bool, int]] = []
        anew = backend.memory.anew

        def hear(lease: Any) -> None:
            heard.append((lease in backend._leases, lease.share_mb))
            anew(lease)

        backend.memory.anew = hear
        sizes: list[int] = []
        run_tests = backend.run_tests

        async def exchange(request: Any, stdins: list[bytes | None], policy: Any) -> Any:
            sizes.append(len(stdins))
            return await run_tests(request, stdins, policy)

        backend.run_tests = exchange
        code = "import time; time.sleep(0.2 * (input() == 'slow')); print('ok')"
        tests = [{"stdin": f"{word}\n", "expected_stdout": "ok\n"} for word in ("slow", "fast", "slow", "fast") * 2]
        body = {"language": "python", "programs": [code], "tests": tests, "cache": False}
        answer = client.post("/v1/evaluate", json=body)
        assert [t["verdict"] for t in answer.json()["results"][0]["tests"]] == ["AC"] * 8, answer.text
        share = 64 if backend.reads_memory else 128  # admitted by a share where what it holds is read
        assert sum(sizes) == 8 and max(sizes) > 1 and heard == [(True, share)] * (8 - len(sizes)), (sizes, heard)
        assert client.post("/v1/execute", json={"language": "python", "code": "print(1)"}).json()["verdict"] == "AC"
        assert len(heard) == 8 - len(sizes)
