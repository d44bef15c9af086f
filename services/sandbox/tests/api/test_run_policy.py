"""Each route builds one :class:`RunPolicy` for its request, and that value is what the pool runs with.

The app is the real one on the local backend; its pool's ``run`` and ``run_tests`` are wrapped to record the
policy each run comes with, then run as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.backends.base import RunOutcome, RunPolicy, RunRequest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for

QUEUE_WAIT_S = 7.5
STDIN_TEST = {"stdin": "1", "expected_stdout": "1"}
CLIENT = "testclient"  # the address TestClient's requests come from


class Recorder:
    """The policies the pool was handed, one for each call of ``run`` or ``run_tests``."""

    def __init__(self, client: TestClient) -> None:
        self.policies: list[RunPolicy] = []
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]
        run, run_tests = backend.run, backend.run_tests

        async def recorded_run(request: RunRequest, policy: RunPolicy) -> RunOutcome:
            self.policies.append(policy)
            outcome: RunOutcome = await run(request, policy)
            return outcome

        async def recorded_run_tests(
            request: RunRequest, stdins: list[bytes | None], policy: RunPolicy
        ) -> list[RunOutcome]:
            self.policies.append(policy)
            outcomes: list[RunOutcome] = await run_tests(request, stdins, policy)
            return outcomes

        backend.run, backend.run_tests = recorded_run, recorded_run_tests


@pytest.fixture(scope="module")
def server() -> Iterator[TestClient]:
    # No step cache: every request reaches the pool, whatever ran before it.
    settings = settings_for("local", fusion_queue_wait_s=QUEUE_WAIT_S, cache_entries=0)
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def recorder(server: TestClient) -> Recorder:
    return Recorder(server)


def _group(**fields: Any) -> dict[str, Any]:
    return {"language": "python", "programs": ["print(input())"], "tests": [STDIN_TEST] * 2, **fields}


# route, body, the policy every run of it must get. Every route admits its request whole before its runs, and
# names its client (its address), whose turn its runs take at the workers.
ROUTES = [
    ("/v1/execute", {"language": "python", "code": "print(1)"}, RunPolicy(cache=True, admitted=True, client=CLIENT)),
    (
        "/v1/execute",
        {"language": "python", "code": "print(1)", "cache": False},
        RunPolicy(cache=False, admitted=True, client=CLIENT),
    ),
    # Requests of many runs take their client's window too.
    ("/v1/evaluate", _group(), RunPolicy(cache=True, admitted=True, client=CLIENT)),
    ("/v1/evaluate", _group(cache=False), RunPolicy(cache=False, admitted=True, client=CLIENT)),
    (
        "/v1/evaluate/batch",
        {"requests": [_group(), _group(cache=False)]},
        RunPolicy(cache=False, admitted=True, client=CLIENT),
    ),
    ("/v1/evaluate/batch", {"requests": [_group(), _group()]}, RunPolicy(cache=True, admitted=True, client=CLIENT)),
    # SandboxFusion's routes: their clients time out on their own, so a run waits no longer than the server says.
    ("/run_code", {"language": "python", "code": "print(1)"}, RunPolicy(False, QUEUE_WAIT_S, True, client=CLIENT)),
    ("/run_jupyter", {"cells": ["1 + 1"]}, RunPolicy(False, QUEUE_WAIT_S, True, client=CLIENT)),
    ("/execute_batch", {"scripts": ["print(1)", "print(2)"]}, RunPolicy(False, None, admitted=True, client=CLIENT)),
]


@pytest.mark.parametrize(("route", "body", "expected"), ROUTES)
def test_the_routes_policy_reaches_the_pool(
    server: TestClient, recorder: Recorder, route: str, body: dict[str, Any], expected: RunPolicy
) -> None:
    r = server.post(route, json=body)
    assert r.status_code == 200, r.text
    assert recorder.policies and set(recorder.policies) == {expected}


def test_one_execution_has_a_window_of_its_own_and_a_request_of_many_runs_its_clients(server: TestClient) -> None:
    backend = server.app.state.executor.backend  # type: ignore[attr-defined]
    many, more = backend.admit(RunPolicy(client=CLIENT)), backend.admit(RunPolicy(client=CLIENT))
    alone = backend.admit(RunPolicy(client=CLIENT), alone=True)
    assert many.window is more.window and alone.window is not many.window


def test_a_request_that_asks_for_no_cache_runs_again_beside_one_that_may_be_cached(backend: str) -> None:
    """The cache is off for the request that says so, and only for it: the policy is the request's own."""
    with TestClient(create_app(settings_for(backend))) as client:
        recorder = Recorder(client)
        body = {"language": "python", "code": "import random\nprint(random.random())"}
        first = client.post("/v1/execute", json=body).json()["run"]
        again = client.post("/v1/execute", json=body).json()["run"]
        fresh = client.post("/v1/execute", json={**body, "cache": False}).json()["run"]
        after = client.post("/v1/execute", json=body).json()["run"]
    assert (first["cached"], again["cached"], fresh["cached"], after["cached"]) == (False, True, False, True)
    assert again["stdout"] == first["stdout"] == after["stdout"] != fresh["stdout"]
    # Two requests reached the pool: the first, and the one that asked for no cache, with its own value.
    assert [p.cache for p in recorder.policies] == [True, False]
