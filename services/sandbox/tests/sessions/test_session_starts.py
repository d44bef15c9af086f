"""One client has sessions started at a bounded rate beyond a burst (``sessions/starts.py``): a loop that makes and
deletes sessions (each a worker's start, a container's on docker and podman) is refused 429, and a batch of groups
made at once is not."""

from __future__ import annotations

from typing import Any

import pytest
from codegym_sandbox.main import create_app
from codegym_sandbox.sessions.errors import StartsTooFast
from codegym_sandbox.sessions.starts import StartRate, starts_per_s
from fastapi.testclient import TestClient
from sandbox_support import settings_for
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_client_has_a_burst_at_once_then_starts_at_its_rate() -> None:
    clock = Clock()
    rate = StartRate(0.5, 3, clock)
    for _ in range(3):  # a group made at once
        rate.take("a")
    with pytest.raises(StartsTooFast) as refused:
        rate.take("a")
    assert refused.value.retry_after_s == 2 and "SESSIONS__CLIENT_STARTS_PER_S" in str(refused.value)
    rate.take("b")  # another client's bucket is its own
    clock.now += 2
    rate.take("a")
    with pytest.raises(StartsTooFast):
        rate.take("a")
    clock.now += 60  # idle: the burst comes back, no more
    for _ in range(3):
        rate.take("a")
    with pytest.raises(StartsTooFast):
        rate.take("a")


def test_the_default_rate_is_a_quarter_of_the_cpus_on_containers_and_none_on_local() -> None:
    assert starts_per_s(0.0, containers=True, cpus=8) == 2.0
    assert starts_per_s(1.5, containers=True, cpus=8) == 1.5
    assert starts_per_s(0.0, containers=False, cpus=8) is None
    assert starts_per_s(1.5, containers=False, cpus=8) == 1.5
    unbounded = StartRate(None, 1)
    for _ in range(100):
        unbounded.take("a")


def test_a_client_that_makes_and_deletes_sessions_in_a_loop_is_refused_and_others_are_not(backend: str) -> None:
    settings = settings_for(backend)
    settings.sessions.warm, settings.sessions.max_sessions_per_client = 0, 3
    settings.sessions.client_starts_per_s = 0.01
    churner, other = {"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}
    # A proxy in front names each client, as `codegym-sandbox serve` with TRUSTED_PROXIES takes its word.
    served: Any = ProxyHeadersMiddleware(create_app(settings), trusted_hosts=["127.0.0.1"])  # type: ignore[arg-type]
    with TestClient(served, client=("127.0.0.1", 5000)) as client:

        def cycle(headers: dict[str, str]) -> Any:
            made = client.post("/v1/sessions", json={}, headers=headers)
            if made.status_code == 201:
                assert client.delete(f"/v1/sessions/{made.json()['session_id']}", headers=headers).status_code == 204
            return made

        assert [cycle(churner).status_code for _ in range(3)] == [201, 201, 201]  # its burst: never more held
        refused = cycle(churner)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 90, refused.text
        assert "SESSIONS__CLIENT_STARTS_PER_S" in refused.json()["detail"]
        assert cycle(other).status_code == 201
