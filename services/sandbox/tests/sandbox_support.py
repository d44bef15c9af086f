"""What the sandbox's tests share: the backends under test and small request helpers.

A module of its own (not ``conftest``), so that test trees of other services, with conftests of their own,
can be collected in the same run.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from codegym_sandbox.backends.choose import docker_problem, podman_problem, runtime_problem
from codegym_sandbox.config import Settings
from fastapi.testclient import TestClient

IMAGE = os.environ.get("CODEGYM_SANDBOX_IMAGE", "codegym-sandbox-runtime:latest")
# docker-gvisor and podman-gvisor (the engine on gVisor's runsc) are variants to ask for by name: the agent
# cannot run on the runsc of Debian bookworm (see SECURITY.md, "gVisor").
BACKENDS = [b for b in os.environ.get("CODEGYM_TEST_BACKENDS", "local,docker,podman").split(",") if b]
GVISOR = "-gvisor"
# Looks up names that do not exist: the kernel keeps an entry for each (about 200-400 bytes), charged to the
# worker's memory cgroup (a container's, on the container backends) and left there once the run's processes are gone.
LOOKUPS = """
import os
tag = os.urandom(4).hex()
for i in range(300_000):
    try:
        os.stat(f"/usr/lib/{tag}_{i}")
    except OSError:
        pass
print("looked")
"""


def backend_problem(backend: str) -> str | None:
    engine = backend.removesuffix(GVISOR)
    problem = None
    if engine == "docker":
        problem = docker_problem(IMAGE)
    if engine == "podman":
        problem = podman_problem("podman", IMAGE)
    if problem is None and backend.endswith(GVISOR):
        problem = runtime_problem(engine, IMAGE, "runsc")
    return problem


def unavailable(backend: str, problem: str) -> None:
    """Skip the test loudly (fail it under CI, where every container backend must run)."""
    message = f"NO {backend.upper()} BACKEND IN THIS RUN: {problem}"
    if os.environ.get("CODEGYM_TEST_REQUIRE_CONTAINERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


# Each test server's container programs get a range of uids of their own (CONTAINER_USER), never one an earlier
# server of the run had (a full run starts hundreds, and what a server left, a container still ending, keeps its
# uids a while): a module's server lives while its tests start others, and a server refuses uids in use.
TEST_FIRST_UID = 1_800_000_000
_ranges = itertools.count()


def server_uid_range() -> str:
    """``uid:gid`` of a test server's first container slot, apart from every other test server's (4096 slots each,
    1024 servers a test process), below 2**31 (docker takes no uid past it)."""
    first = TEST_FIRST_UID + ((os.getpid() % 64) * 1024 + next(_ranges) % 1024) * 4096
    return f"{first}:{first}"


def settings_for(backend: str, **overrides: Any) -> Settings:
    """Settings of a test server on ``backend``; skips (or fails, under CI) when it cannot run here."""
    problem = backend_problem(backend)
    if problem is not None:
        unavailable(backend, problem)
    # No workers started ahead unless a test asks: a module's server would start scores of them (CPU the tests
    # run on) to lend to bursts that few tests send; the servers that test lending use the defaults.
    fields: dict[str, Any] = {"workers": 2, "reserve_workers": 0, **overrides}
    if backend.endswith(GVISOR):
        fields.setdefault("container_runtime", "runsc")
    if backend != "local":
        fields.setdefault("container_user", server_uid_range())
    settings = Settings(backend=backend.removesuffix(GVISOR), image=IMAGE, **fields)  # type: ignore[arg-type]
    # Test clients make sessions back to back from one address, far faster than a trainer's steps do: the bound on
    # a client's session starts is tested where a test sets it (sessions/test_session_starts.py).
    if not settings.sessions.client_starts_per_s:
        settings.sessions.client_starts_per_s = 1000.0
    return settings


def run_code(client: TestClient, code: str, language: str = "python", **fields: Any) -> dict[str, Any]:
    """``POST /run_code`` that must answer 200; the JSON body."""
    r = client.post("/run_code", json={"code": code, "language": language, **fields})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def stdout(body: dict[str, Any]) -> str:
    out: str = body["run_result"]["stdout"]
    return out


def metric_value(text: str, sample: str) -> float:
    """The value of one sample (name and labels, as Prometheus writes them) in a ``/metrics`` text."""
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
    assert match, f"{sample} not in metrics"
    return float(match.group(1))


def metric(client: TestClient, sample: str) -> float:
    """The value of one sample in the app's ``/metrics`` now."""
    return metric_value(client.get("/metrics").text, sample)


T = TypeVar("T")


async def while_ticking(work: Awaitable[T]) -> tuple[T, float]:
    """``work``'s result, and the longest the event loop went meanwhile between the turns of a 5 ms ticker (the
    tick after the work counted too): how long ``work`` held the loop from every other client."""
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)  # ticking
    try:
        done = await work
        await asyncio.sleep(0.02)
    finally:
        ticker.cancel()
    return done, max(gaps, default=0.0)
