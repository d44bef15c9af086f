"""Faults from outside the program: a worker or container killed, the server restarted, a full disk.

Each time the runs that were hit get a SandboxError (never a wrong verdict), every other run is right,
and the pool heals without a restart. Workers killed at random *during load* are in ``test_load.py``.
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import hostile_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import ServerProcess, agents_of, free_port, wait_dead

SLOW = "import time\ntime.sleep(2)\nprint('slow done')\n"


def _execute(client: TestClient, code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/execute", json={"language": "python", "code": code, **fields})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _healed(client: TestClient, workers: int, within_s: float = 60.0) -> None:
    """Every slot of the pool's own alive again (workers lent meanwhile may still be there, idle)."""
    deadline = time.monotonic() + within_s

    def own(ready: dict[str, Any]) -> int:
        return int(ready.get("alive", 0)) - int(ready.get("lent_now", 0))

    while own(client.get("/readyz").json()) != workers:
        assert time.monotonic() < deadline, f"the pool did not heal: {client.get('/readyz').json()}"
        time.sleep(0.2)
    for i in range(2 * workers):  # every slot serves a right answer again
        assert _execute(client, f"print({i} * 2)")["run"]["stdout"] == f"{i * 2}\n"


def _while_running(client: TestClient, runs: int, act: Callable[[], None]) -> list[dict[str, Any]]:
    """Start ``runs`` slow runs at once, ``act`` while they run, and return their answers."""
    with ThreadPoolExecutor(runs) as pool:
        futures = [pool.submit(_execute, client, SLOW + f"# {i}", limits={"timeout_s": 5}) for i in range(runs)]
        time.sleep(0.8)
        act()
        return [f.result() for f in futures]


def test_local_worker_killed_mid_run() -> None:
    # A fixed pool: the one agent there is is the one killed (lending would start more ahead).
    with TestClient(create_app(hostile_settings("local", workers=1, max_workers=1))) as client:
        agents = agents_of(os.getpid())
        assert len(agents) == 1

        def kill() -> None:
            os.kill(agents[0], signal.SIGKILL)

        [hit] = _while_running(client, 1, kill)
        assert hit["verdict"] == "SE" and hit["run"]["error"], hit
        _healed(client, 1)


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_container_killed_from_outside(engine: str) -> None:
    server_id = f"fault{secrets.token_hex(3)}"
    settings = hostile_settings(engine, workers=2, server_id=server_id)  # skips loudly without the engine
    with TestClient(create_app(settings)) as client:
        container = f"codegym-sandbox-local-{server_id}-0"

        def kill() -> None:
            subprocess.run([engine, "kill", container], check=True, capture_output=True, timeout=60)

        answers = _while_running(client, 2, kill)
        verdicts = sorted(a["verdict"] for a in answers)
        assert verdicts == ["AC", "SE"], answers  # the run in the killed container, and the other one
        ok = next(a for a in answers if a["verdict"] == "AC")
        assert ok["run"]["stdout"] == "slow done\n"
        _healed(client, 2)


@pytest.mark.parametrize("backend", ["local", "docker", "podman"])
def test_disk_nearly_full(backend: str) -> None:
    """A 16 MiB scratch space: input files that do not fit are the sandbox's failure (SE), a program that
    fills it gets its own error, and the next run has all of it again."""
    from codegym_sandbox.config import Limits

    from .suite import SUITE_LIMITS

    limits = Limits.model_validate({**SUITE_LIMITS, "scratch_bytes": 16 << 20})
    settings = hostile_settings(backend, workers=1, limits=limits, max_body_bytes=64 << 20)
    with TestClient(create_app(settings)) as client:
        big = base64.b64encode(os.urandom(20 << 20)).decode()
        too_big = _execute(client, "print('never')", files={"input.bin": big})
        assert too_big["verdict"] == "SE" and "space" in (too_big["run"]["error"] or "").lower(), too_big
        fill = "n = 0\ntry:\n    while True:\n        open(f'f{n}', 'wb').write(b'x' * (1 << 20))\n        n += 1\n"
        fill += "except OSError as exc:\n    print('full', exc.errno)\n    raise\n"
        full = _execute(client, fill)
        assert full["verdict"] == "RE" and full["run"]["stdout"] == "full 28\n", full
        fits = _execute(client, "open('again', 'wb').write(b'x' * (12 << 20))\nprint('fits')")
        assert fits["verdict"] == "AC" and fits["run"]["stdout"] == "fits\n", fits
        _healed(client, 1)


def test_server_restarted_while_a_client_retries() -> None:
    """The server dies hard mid-stream and comes back on the same port: a retrying client gets every answer,
    each exactly once and right; the dead server's workers died with it."""
    port = free_port()
    env = {
        "CODEGYM_SANDBOX_WORKERS": "2",
        "CODEGYM_SANDBOX_MAX_WORKERS": "2",  # a fixed pool: two agents
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_SANDBOX_CACHE_ENTRIES": "0",
    }
    first = ServerProcess(env, ["--log-level", "warning"], port=port).start()
    old_agents = agents_of(first.pid)
    assert len(old_agents) == 2
    answers: dict[int, str] = {}
    errors: list[str] = []
    half = threading.Event()

    def client() -> None:
        with httpx.Client(base_url=first.url, timeout=10) as http:
            for i in range(40):
                deadline = time.monotonic() + 60
                while True:
                    try:
                        r = http.post("/v1/execute", json={"language": "python", "code": f"print({i} * 3)"})
                        if r.status_code == 200 and r.json()["verdict"] != "SE":
                            break
                        if r.status_code not in (200, 503):
                            errors.append(f"{i}: HTTP {r.status_code}")
                            return
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        errors.append(f"{i}: no answer within a minute")
                        return
                    time.sleep(0.1)
                answers[i] = r.json()["run"]["stdout"]
                if i == 10:
                    half.set()

    worker = threading.Thread(target=client)
    worker.start()
    second = ServerProcess(env, ["--log-level", "warning"], port=port)
    try:
        assert half.wait(60)
        first.stop(signal.SIGKILL)
        time.sleep(0.5)
        second.start()
        worker.join(120)
        assert not errors, errors
        assert answers == {i: f"{i * 3}\n" for i in range(40)}
        assert not wait_dead(old_agents), "workers outlived their server"
    finally:
        first.stop()
        second.stop()
        for server in (first, second):
            server.log.unlink(missing_ok=True)
