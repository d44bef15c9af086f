"""The local worker pool: bounded queue, and healing when agents die."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from codegym_sandbox.backends.lending import LEND_PER_CPU
from codegym_sandbox.config import Limits, Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import run_code, stdout


def _worker_pids(client: TestClient) -> list[int]:
    backend = client.app.state.executor.backend  # type: ignore[attr-defined]
    return [w.pid for w in backend._workers if w is not None]


def _wait_alive(client: TestClient, n: int) -> None:
    deadline = time.monotonic() + 20
    while client.get("/readyz").json()["alive"] < n:
        assert time.monotonic() < deadline, "the pool did not heal"
        time.sleep(0.05)


@pytest.mark.parametrize(("route", "status"), [("/v1/execute", 503), ("/run_code", 504)])
def test_saturation_is_refused_with_retry_after_in_a_status_the_clients_retry(route: str, status: int) -> None:
    """503 on the native API; 504 on SandboxFusion's route, the one status verl's client retries."""
    settings = Settings(backend="local", workers=1, max_workers=1, queue_size=0)
    with TestClient(create_app(settings)) as client:
        req = {"code": "import time; time.sleep(1.5); print('slept')", "language": "python"}

        def post(_: int) -> httpx.Response:
            return client.post(route, json=req)

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, 0)
            time.sleep(0.5)  # the first run holds the only worker by now
            second = pool.submit(post, 1)
            responses = [first.result(timeout=30), second.result(timeout=30)]
        assert sorted(r.status_code for r in responses) == [200, status]
        busy = next(r for r in responses if r.status_code == status)
        assert busy.headers["retry-after"] == "1" and "busy" in busy.json()["detail"]
        assert "codegym_sandbox_rejected_total 1.0" in client.get("/metrics").text
        assert run_code(client, "print('free again')")["status"] == "Success"


def test_a_run_code_request_that_waits_past_the_queue_limit_is_refused_with_504() -> None:
    settings = Settings(backend="local", workers=1, max_workers=1, fusion_queue_wait_s=0.5)
    with TestClient(create_app(settings)) as client:
        req = {"code": "import time; time.sleep(2); print('slept')", "language": "python"}
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.post, "/run_code", json=req)
            time.sleep(0.3)
            started = time.monotonic()
            second = pool.submit(client.post, "/run_code", json=req).result(timeout=30)
            waited = time.monotonic() - started
            assert first.result(timeout=30).json()["run_result"]["stdout"] == "slept\n"
        assert second.status_code == 504 and second.headers["retry-after"] == "1", second.text
        assert "stayed busy for 0.5 s" in second.json()["detail"]
        assert waited < 1.5  # refused at its limit, not when the worker came free


def test_runs_that_sleep_get_lent_slots_and_all_run_at_once() -> None:
    """Forty runs that each sleep a second on one worker: slots are lent while the CPUs idle, so they end
    together (queued one after another they would take forty seconds), and the lent slots serve later runs."""
    limits = Limits(memory_mb=128)  # memory for all forty at once: the budget is not what this tests
    settings = Settings(
        backend="local", workers=1, max_workers=48, cache_entries=0, limits=limits, fusion_queue_wait_s=0
    )
    with TestClient(create_app(settings)) as client:
        req = {"language": "python", "code": "import time; time.sleep(1); print(input())"}
        started = time.monotonic()
        with ThreadPoolExecutor(40) as pool:
            outs = list(pool.map(lambda i: client.post("/run_code", json={**req, "stdin": str(i)}), range(40)))
        took = time.monotonic() - started
        assert [r.json()["run_result"]["stdout"] for r in outs] == [f"{i}\n" for i in range(40)]
        assert took < 10, took
        ready = client.get("/readyz").json()
        assert ready["lent"] >= 20 and ready["max_workers"] == 48, ready
        assert ready["alive"] <= 48


def test_runs_that_compute_are_not_lent_slots() -> None:
    """Runs that keep the CPUs busy wait for the workers there are: more at once would only share the CPUs
    (and stretch each run's wall time towards its limit)."""
    cpus = len(os.sched_getaffinity(0))
    settings = Settings(backend="local", workers=cpus, max_workers=cpus + 16, cache_entries=0, fusion_queue_wait_s=0)
    with TestClient(create_app(settings)) as client:
        req = {
            "language": "python",
            "code": "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass",
        }
        with ThreadPoolExecutor(4 * cpus) as pool:
            outs = list(pool.map(lambda i: client.post("/run_code", json=req), range(4 * cpus)))
        assert all(r.json()["status"] == "Success" for r in outs)
        assert client.get("/readyz").json()["lent"] <= LEND_PER_CPU * cpus  # a step at most, on a reading's jitter


def test_short_runs_that_compute_one_after_another_are_not_crowded_by_lent_slots() -> None:
    """Assert tests go to a worker in parts, each part one exchange in which the worker forks, runs and reaps
    one short program after another: the worker computes the whole time though its living processes mostly
    wait, and must count as busy. Counted idle, it had a worker lent to every waiting run, scores of them
    computing side by side on each CPU."""
    cpus = len(os.sched_getaffinity(0))
    settings = Settings(backend="local", workers=cpus, max_workers=cpus + 64, cache_entries=0)
    with TestClient(create_app(settings)) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        peak, done = [0], threading.Event()

        def watch() -> None:
            while not done.wait(0.005):
                peak[0] = max(peak[0], len(backend._busy))

        spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.02: pass\n"
        programs = [f"{spin}def f():\n    return {i}\n" for i in range(48)]
        body = {"language": "python", "programs": programs, "tests": [{"assert_code": "assert f() >= 0"}]}
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(4) as pool:
                outs = list(pool.map(lambda _: client.post("/v1/evaluate", json=body), range(4)))
        finally:
            done.set()
            watcher.join()
        assert all(p["verdict"] == "AC" for r in outs for p in r.json()["results"]), [r.text[:300] for r in outs]
        # Where the server is slower than the runs, they wait for it and are idle: a step may be lent then,
        # and another while runs of the first that ended wait for the server to read them (busy, but measured
        # asleep, and not looked at again for REMEASURE_ASLEEP_S); never a worker for each of the 180-odd runs
        # that wait.
        assert peak[0] <= cpus + 2 * LEND_PER_CPU * cpus
        assert client.get("/readyz").json()["lent"] <= 180 // 4


@pytest.mark.parametrize("sleepers", [2, 8])
def test_honest_runs_that_compute_after_sleepers_are_not_crowded_into_a_time_out(sleepers: int) -> None:
    """Programs that sleep hold the workers (and are lent more), then a burst of honest runs that each compute
    about half their limit arrives. Lending a worker to each at once put eight on a CPU, and 16 of 16 were
    TLE; now the burst gets a step of lent workers at a time (counted while it runs), and no more of it is TLE
    than of the same burst on the fresh pool before, or once the sleepers have gone: what ran before must not
    change a verdict. (Comparing with the fresh pool keeps the test true on a machine that other work slows.)"""
    cpus = len(os.sched_getaffinity(0))
    limit = 1.0
    spin = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {0.4 * limit}: pass\nprint('done')"
    burst = 8 * cpus
    settings = Settings(backend="local", workers=cpus, cache_entries=0, fusion_queue_wait_s=0)  # the burst waits
    with TestClient(create_app(settings)) as client:

        def compute(_: int) -> str:
            return str(run_code(client, spin, run_timeout=limit)["run_result"]["status"])

        def timeouts(pool: ThreadPoolExecutor) -> tuple[int, int]:
            """TLEs of one burst, and the most runs in flight while it ran."""
            done = threading.Event()

            def peak() -> int:
                most = 0
                while not done.wait(0.02):
                    most = max(most, int(client.get("/readyz").json()["busy"]))
                return most

            watcher = pool.submit(peak)
            verdicts = list(pool.map(compute, range(burst)))
            done.set()
            return sum(v == "TimeLimitExceeded" for v in verdicts), watcher.result()

        with ThreadPoolExecutor(sleepers + burst + 1) as pool:
            fresh, _ = timeouts(pool)
            sleep = f"import time; time.sleep({burst * 0.4 * limit / cpus + 3})"
            held = [pool.submit(run_code, client, sleep, run_timeout=30) for _ in range(sleepers)]
            deadline = time.monotonic() + 30  # the sleepers run (those beyond the pool's own workers on lent ones)
            while client.get("/readyz").json()["busy"] < sleepers:
                assert time.monotonic() < deadline, "the sleepers never all ran"
                time.sleep(0.05)
            during, most = timeouts(pool)
            assert all(h.result()["run_result"]["status"] == "Finished" for h in held)
            after, _ = timeouts(pool)
        assert most <= sleepers + LEND_PER_CPU * cpus, most
        assert during <= fresh and after <= fresh, (fresh, during, after)


@pytest.mark.parametrize("sleepers", [32])
def test_sleepers_all_start_at_once(sleepers: int) -> None:
    """Runs that sleep at once all sleep together: the spread of their starts (the time each program reads as
    it starts) is well within the time each sleeps. A hundred through this in-process client spread over
    2.1-2.6 s on two CPUs, past half their nap: tests/test_rl_clients.py holds the hundred sleepers of
    SkyRL and verl (run + 2 s) on a server of its own."""
    cpus = len(os.sched_getaffinity(0))
    nap = 4.0
    # Memory for every sleeper at once (the budget is not what this tests: the lending is).
    settings = Settings(
        backend="local",
        workers=cpus,
        cache_entries=0,
        memory_budget_mb=sleepers * 128 + 1024,
        limits=Limits(memory_mb=128),
        fusion_queue_wait_s=0,
    )
    code = f"import time\nprint(time.time())\ntime.sleep({nap})"
    with TestClient(create_app(settings)) as client:

        def start(_: int) -> float:
            return float(stdout(run_code(client, code, run_timeout=2 * nap)))

        with ThreadPoolExecutor(sleepers) as pool:
            starts = sorted(pool.map(start, range(sleepers)))
        spread = [round(s - starts[0], 2) for s in starts]
        assert spread[-1] < nap / 2, f"starts after the first: {spread[:: max(sleepers // 10, 1)]}"


def test_runs_queue_for_a_free_worker() -> None:
    with TestClient(create_app(Settings(backend="local", workers=1, queue_size=4))) as client:
        req: dict[str, Any] = {"language": "python", "code": "import time; time.sleep(0.3); print(input())"}
        with ThreadPoolExecutor(3) as pool:
            outs = list(pool.map(lambda i: client.post("/run_code", json={**req, "stdin": str(i)}), range(3)))
        assert [r.json()["run_result"]["stdout"] for r in outs] == ["0\n", "1\n", "2\n"]


def test_a_group_larger_than_the_queue_is_admitted_whole_and_the_next_request_takes_its_turn() -> None:
    settings = Settings(backend="local", workers=1, max_workers=1, queue_size=2, cache_entries=0)
    with TestClient(create_app(settings)) as client:
        group = {
            "language": "python",
            "programs": [f"import time; time.sleep(0.05); print(int(input()) + {i})" for i in range(4)],
            "tests": [{"stdin": str(n), "expected_stdout": str(n)} for n in range(3)],
        }

        def evaluate(_: int) -> httpx.Response:
            return client.post("/v1/evaluate", json=group)

        with ThreadPoolExecutor(2) as pool:
            big = pool.submit(evaluate, 0)
            time.sleep(0.3)  # 12 runs against a queue of 2: the group is in, its window (1 run) in the pool
            late = pool.submit(lambda _: client.post("/run_code", json={"code": "print(1)", "language": "python"}), 1)
            answers = big.result(timeout=60), late.result(timeout=60)
        assert answers[0].status_code == 200, answers[0].text
        results = answers[0].json()["results"]
        assert [r["passed"] for r in results] == [3, 0, 0, 0]
        assert all(t["verdict"] in ("AC", "WA") for r in results for t in r["tests"])
        # A request arriving meanwhile is admitted, and its run takes its turn with the group's (which held the
        # queue past its bound, every other request refused, for as long as it ran: pool.admit's window).
        assert answers[1].status_code == 200 and answers[1].json()["run_result"]["stdout"] == "1\n", answers[1].text


@pytest.fixture(scope="module")
def healing() -> Iterator[TestClient]:
    # A fixed pool: these tests kill and count its workers (lent ones have tests of their own).
    with TestClient(create_app(Settings(backend="local", workers=2, max_workers=2))) as c:
        yield c


def test_agent_killed_mid_run_is_sandbox_error_and_heals(healing: TestClient) -> None:
    pids = _worker_pids(healing)

    def killer() -> None:
        time.sleep(0.7)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=killer)
    thread.start()
    body = run_code(healing, "import time; time.sleep(3)", run_timeout=5)
    thread.join()
    assert body["status"] == "SandboxError" and body["run_result"]["status"] == "Error"
    assert "worker" in body["message"]
    _wait_alive(healing, 2)
    assert set(_worker_pids(healing)).isdisjoint(pids)
    assert healing.get("/readyz").json()["restarts"] >= 2
    for i in range(4):
        assert stdout(run_code(healing, f"print({i})")) == f"{i}\n"
    native = healing.post("/v1/execute", json={"language": "python", "code": "print('n')"}).json()
    assert native["verdict"] == "AC"


def test_idle_agent_killed_is_never_handed_a_run(healing: TestClient) -> None:
    _wait_alive(healing, 2)
    pids = _worker_pids(healing)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    body = run_code(healing, "print('fresh worker')")
    assert body["status"] == "Success" and stdout(body) == "fresh worker\n"
    _wait_alive(healing, 2)
    status = healing.get("/readyz").json()
    assert status["busy"] == 0 and status["queued"] == 0


def test_sandbox_errors_are_not_cached(healing: TestClient) -> None:
    _wait_alive(healing, 2)
    pids = _worker_pids(healing)
    req = {"language": "python", "code": "import time; time.sleep(2); print('done')"}

    def killer() -> None:
        time.sleep(0.5)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=killer)
    thread.start()
    first = healing.post("/v1/execute", json=req).json()
    thread.join()
    assert first["verdict"] == "SE" and first["run"]["error"]
    _wait_alive(healing, 2)
    again = healing.post("/v1/execute", json=req).json()
    assert again["verdict"] == "AC" and again["run"]["cached"] is False


def test_breaker_opens_on_repeated_failures_and_closes_when_a_worker_starts() -> None:
    settings = Settings(backend="local", workers=1, max_workers=1, breaker_cooldown_s=0.5)  # a fixed pool
    with TestClient(create_app(settings)) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        # Every restart of the slot fails from now on: agents come from a zygote that cannot start again.
        good = backend.zygote.argv[0]
        backend.zygote.argv[0] = "/nonexistent/python3"
        os.kill(backend.zygote.proc.pid, signal.SIGKILL)
        os.kill(_worker_pids(client)[0], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not (status := client.get("/readyz")).json()["broken_slots"]:
            assert time.monotonic() < deadline, "the breaker never opened"
            time.sleep(0.05)
        assert status.status_code == 503 and status.json()["ready"] is False
        broken = status.json()["broken_slots"][0]
        assert broken["slot"] == 0 and "nonexistent" in broken["error"]
        backend.zygote.argv[0] = good  # the cause goes away: the next try after the cooldown succeeds
        _wait_alive(client, 1)
        assert client.get("/readyz").json()["broken_slots"] == []
        assert stdout(run_code(client, "print('healed')")) == "healed\n"


def test_time_a_run_waits_for_a_cpu_held_by_other_runs_is_not_counted_against_its_limit() -> None:
    """Twice as many workers as CPUs, each run computing 0.6 s with a 1 s limit: two runs share each CPU,
    so each takes about 1.2 s of wall time, and none may be TLE for it. Alone, a run over its CPU time
    is still TLE, and so is a sleeper: sleeping is not waiting for a CPU."""
    cpus = len(os.sched_getaffinity(0))
    settings = Settings(backend="local", workers=2 * cpus, max_workers=2 * cpus, cache_entries=0)
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\nprint('done')"
    with TestClient(create_app(settings)) as client:

        def post(code: str) -> dict[str, Any]:
            return run_code(client, code, run_timeout=1)

        with ThreadPoolExecutor(2 * cpus) as pool:
            answers = list(pool.map(post, [busy.format(0.6)] * (2 * cpus)))
        assert [a["run_result"]["status"] for a in answers] == ["Finished"] * (2 * cpus), answers
        assert max(a["run_result"]["execution_time"] for a in answers) > 1.0  # they did share the CPUs
        with ThreadPoolExecutor(2 * cpus) as pool:
            answers = list(pool.map(post, [busy.format(1.5)] * (2 * cpus)))
        assert [a["run_result"]["status"] for a in answers] == ["TimeLimitExceeded"] * (2 * cpus)
        started = time.monotonic()
        assert post("import time; time.sleep(5)")["run_result"]["status"] == "TimeLimitExceeded"
        assert time.monotonic() - started < 2.5


def test_agents_start_as_interpreters_of_their_own_where_the_kernel_has_no_pidfds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("codegym_sandbox.backends.local.pidfds_work", lambda: False)
    with TestClient(create_app(Settings(backend="local", workers=1, max_workers=3))) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        assert not backend.forking and backend.zygote.proc is None
        req = {"language": "python", "code": "import time; time.sleep(0.6); print(input())"}
        with ThreadPoolExecutor(3) as pool:
            outs = list(pool.map(lambda i: client.post("/run_code", json={**req, "stdin": str(i)}), range(3)))
        assert [stdout(r.json()) for r in outs] == ["0\n", "1\n", "2\n"]


def test_a_dead_zygote_is_started_again_for_the_next_agent() -> None:
    with TestClient(create_app(Settings(backend="local", workers=1, max_workers=1))) as client:  # a fixed pool
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        first = backend.zygote.proc.pid
        os.kill(first, signal.SIGKILL)
        os.kill(_worker_pids(client)[0], signal.SIGKILL)  # its replacement needs a zygote
        deadline = time.monotonic() + 20
        while backend.zygote.proc is None or backend.zygote.proc.pid == first or not _worker_pids(client):
            assert time.monotonic() < deadline, "no new zygote"
            time.sleep(0.05)
        _wait_alive(client, 1)
        assert stdout(run_code(client, "print('again')")) == "again\n"
        assert client.get("/readyz").json()["broken_slots"] == []
