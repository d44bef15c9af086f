"""What a session's calls retry, and where, in both clients: a create like any request (over the URLs), a
session's calls only to its server, and a cell never sent twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from codegym_sandbox.client import (
    AsyncSandboxClient,
    RetryPolicy,
    SandboxClient,
    SandboxUnavailable,
    SessionBusy,
    SessionGone,
)

FAST = RetryPolicy(retries=2, backoff_s=0.001)
URLS = ["http://a", "http://b"]
CELL = {
    "stdout": "",
    "stderr": "",
    "display": "2",
    "error": None,
    "status": "finished",
    "execution_time": 0.001,
    "cpu_time": 0.001,
    "output_truncated": False,
    "alive": True,
}
INFO = {
    "session_id": "b-1",
    "language": "python",
    "age_s": 1.0,
    "idle_s": 1.0,
    "cells": 1,
    "memory_mb": 512,
    "expires_at": 9.0,
    "busy": False,
}
Fault = Callable[[httpx.Request, int], httpx.Response | None]  # (request, its number on its path) -> answer


def server(fault: Fault, calls: list[str]) -> Callable[[httpx.Request], httpx.Response]:
    """Two servers in one handler: a and b make sessions named after themselves; ``fault`` answers first."""

    def handle(request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        calls.append(f"{host} {request.method} {path}")
        answer = fault(request, sum(1 for c in calls if c.endswith(f" {request.method} {path}")))
        if answer is not None:
            return answer
        if path == "/v1/sessions":
            return httpx.Response(201, json={"session_id": f"{host}-1", "expires_at": 9.0})
        if path.endswith("/execute"):
            return httpx.Response(200, json=CELL)
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(200, json=INFO)

    return handle


def both(fault: Fault, cell: str = "execute") -> list[tuple[object, list[str]]]:
    """Each client (sync, then async): make a session, then one call of it (``cell``: execute or info); what
    that call gave (its answer's display or status, or its exception) and every request sent."""
    out: list[tuple[object, list[str]]] = []
    calls: list[str] = []
    transport = httpx.MockTransport(server(fault, calls))
    with SandboxClient(URLS, retry=FAST, transport=transport) as client:
        s = client.session()
        try:
            got: object = s.execute("1 + 1").display if cell == "execute" else s.info().cells
        except Exception as exc:
            got = exc
        out.append((got, calls[:]))

    async def run() -> None:
        calls.clear()
        async with AsyncSandboxClient(URLS, retry=FAST, transport=transport) as client:
            s = await client.session()
            try:
                got: object = (await s.execute("1 + 1")).display if cell == "execute" else (await s.info()).cells
            except Exception as exc:
                got = exc
            out.append((got, calls[:]))

    asyncio.run(run())
    return out


def test_a_create_is_retried_over_the_urls_and_the_session_stays_where_it_was_made() -> None:
    def full(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path == "/v1/sessions" and n == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": "this server holds 1 sessions"})
        return None

    for got, calls in both(full):
        assert got == "2"
        # a full, then b made it; its cell goes to b, not to the next URL in turn (a)
        assert calls == ["a POST /v1/sessions", "b POST /v1/sessions", "b POST /v1/sessions/b-1/execute"]


@pytest.mark.parametrize("lost", [httpx.ReadTimeout, httpx.RemoteProtocolError, 502, 504])
def test_a_create_whose_answer_was_lost_goes_again_to_its_server_with_its_key(lost: type[Exception] | int) -> None:
    # The server may have made the session: sent again there with the same key, it answers with that session;
    # sent to the next URL, a second session would be made there, and the first left to its TTL.
    keys: list[str | None] = []

    def losing(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path == "/v1/sessions":
            keys.append(request.headers.get("Idempotency-Key"))
            if n == 1:
                if isinstance(lost, int):
                    return httpx.Response(lost, json={"detail": "a proxy timed out"})
                raise lost("the answer was lost", request=request)
        return None

    for got, calls in both(losing):
        assert got == "2"
        assert calls == ["a POST /v1/sessions", "a POST /v1/sessions", "a POST /v1/sessions/a-1/execute"]
    # one key per create, the same on each of its attempts (and another for the async client's create)
    assert len(keys) == 4 and keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2], keys
    assert all(k and len(k) == 36 for k in keys), keys


@pytest.mark.parametrize("lost", [httpx.ReadTimeout, 500, 502])
def test_a_create_goes_again_to_its_server_once_then_on_to_the_next(lost: type[Exception] | int) -> None:
    # A server that keeps failing (hung, or answering 5xx) is left after one resend with the key: the create is
    # made by the next URL, as without a key (what the first may have made ends at its idle TTL).
    def failing(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path == "/v1/sessions" and request.url.host == "a":
            if isinstance(lost, int):
                return httpx.Response(lost, json={"detail": "failing"})
            raise lost("no answer", request=request)
        return None

    for got, calls in both(failing):
        assert got == "2"
        assert calls == [
            "a POST /v1/sessions",
            "a POST /v1/sessions",
            "b POST /v1/sessions",
            "b POST /v1/sessions/b-1/execute",
        ]


@pytest.mark.parametrize("error", [httpx.ConnectError, httpx.ConnectTimeout])
def test_a_cell_that_never_left_is_sent_again_to_its_own_server(error: type[httpx.TransportError]) -> None:
    def refused(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path.endswith("/execute") and n == 1:
            raise error("refused", request=request)
        return None

    for got, calls in both(refused):
        assert got == "2"
        assert calls[1:] == ["a POST /v1/sessions/a-1/execute"] * 2


@pytest.mark.parametrize("error", [httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError])
def test_a_cell_that_may_have_run_is_never_sent_twice(error: type[httpx.TransportError]) -> None:
    def lost(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path.endswith("/execute"):
            raise error("the answer was lost", request=request)
        return None

    for got, calls in both(lost):
        assert isinstance(got, SandboxUnavailable) and got.status is None and got.url == "http://a", got
        assert calls[1:] == ["a POST /v1/sessions/a-1/execute"]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_cells_retried_status_is_not_retried(status: int) -> None:
    def failing(request: httpx.Request, n: int) -> httpx.Response | None:
        return httpx.Response(status, headers={"Retry-After": "0"}) if request.url.path.endswith("/execute") else None

    for got, calls in both(failing):
        assert isinstance(got, SandboxUnavailable) and got.status == status, got
        assert len(calls) == 2


def test_a_sessions_look_is_retried_but_only_at_its_server() -> None:
    def flaky(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.method == "GET" and n == 1:
            raise httpx.ReadError("reset", request=request)
        if request.method == "GET" and n == 2:
            return httpx.Response(503, headers={"Retry-After": "0"})
        return None

    for got, calls in both(flaky, cell="info"):
        assert got == 1
        assert calls[1:] == ["a GET /v1/sessions/a-1"] * 3


@pytest.mark.parametrize(("status", "kind"), [(404, SessionGone), (410, SessionGone), (409, SessionBusy)])
def test_a_sessions_refusals_raise_its_errors_with_the_servers_detail(status: int, kind: type[Exception]) -> None:
    def refusing(request: httpx.Request, n: int) -> httpx.Response | None:
        if request.url.path.endswith("/execute"):
            return httpx.Response(status, json={"detail": f"session 'a-1' said {status}"})
        return None

    for got, calls in both(refusing):
        assert isinstance(got, kind), got
        assert (got.status, got.detail, got.session_id) == (status, f"session 'a-1' said {status}", "a-1")  # type: ignore[attr-defined]
        assert len(calls) == 2
