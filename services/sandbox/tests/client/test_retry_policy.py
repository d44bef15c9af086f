"""The client's one retry policy, the same in both clients: which answers are retried, after how long, where."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from codegym_sandbox.client import (
    AsyncSandboxClient,
    RetryPolicy,
    SandboxClient,
    SandboxProtocolError,
    SandboxRejected,
    SandboxUnavailable,
)
from codegym_sandbox.client._core import Core, Send, Wait
from codegym_sandbox.models import EvaluateResponse

EXECUTED = {
    "verdict": "AC",
    "compile": None,
    "run": {
        "verdict": "AC",
        "exit_code": 0,
        "signal": None,
        "wall_s": 0.01,
        "cpu_s": 0.01,
        "max_rss_kb": 1,
        "stdout": "hi\n",
        "stderr": "",
        "output_truncated": False,
        "cached": False,
    },
}
BODY = {"language": "python", "code": "print('hi')"}
FAST = RetryPolicy(retries=2, backoff_s=0.001)
Handler = Callable[[httpx.Request], httpx.Response]


def both(urls: list[str], handler: Handler, retry: RetryPolicy = FAST) -> list[object]:
    """What each client (sync, then async) gets for one ``/v1/execute``: the answer or the exception."""
    out: list[object] = []
    with SandboxClient(urls, retry=retry, transport=httpx.MockTransport(handler)) as client:
        try:
            out.append(client.execute(BODY))
        except Exception as exc:
            out.append(exc)

    async def run() -> None:
        async with AsyncSandboxClient(urls, retry=retry, transport=httpx.MockTransport(handler)) as client:
            try:
                out.append(await client.execute(BODY))
            except Exception as exc:
                out.append(exc)

    asyncio.run(run())
    return out


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_a_saturated_or_failing_server_is_retried(status: int) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        return httpx.Response(status if len(calls) % 2 else 200, json=EXECUTED)

    sync, async_ = both(["http://a"], handler, RetryPolicy(retries=1, backoff_s=0.001))
    assert sync == async_ and getattr(sync, "verdict", None) is not None
    assert len(calls) == 4  # one failure, one success, per client


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 413, 422, 501])
def test_a_refused_request_is_not_retried(status: int) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(status, json={"detail": "no"})

    for got in both(["http://a", "http://b"], handler):
        assert isinstance(got, SandboxRejected) and got.status == status and f"HTTP {status}" in str(got)
    assert calls == 2


@pytest.mark.parametrize("error", [httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError])
def test_a_transport_error_is_retried_until_the_retries_run_out(error: type[httpx.TransportError]) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise error("down", request=request)

    for got in both(["http://a"], handler):
        assert isinstance(got, SandboxUnavailable) and "down" in str(got) and got.status is None
    assert calls == 2 * (FAST.retries + 1)


def test_the_attempts_go_to_each_url_in_turn() -> None:
    hosts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        if request.url.host == "up":
            return httpx.Response(200, json=EXECUTED)
        return httpx.Response(503, headers={"Retry-After": "0"})

    sync, async_ = both(["http://busy", "http://down", "http://up"], handler)
    assert sync == async_
    assert hosts == ["busy", "down", "up"] * 2


def test_retries_spent_give_the_last_status() -> None:
    got = both(["http://a"], lambda r: httpx.Response(503, text="queue full"))
    assert all(isinstance(g, SandboxUnavailable) and g.status == 503 and "queue full" in str(g) for g in got)


def test_an_answer_that_is_not_the_apis_is_a_protocol_error() -> None:
    for body in ({"hello": "world"}, "<html>"):
        handler: Handler = lambda r, b=body: httpx.Response(200, json=b)  # noqa: E731
        assert all(isinstance(g, SandboxProtocolError) for g in both(["http://a"], handler))
    assert all(isinstance(g, SandboxProtocolError) for g in both(["http://a"], lambda r: httpx.Response(200, text="{")))


@pytest.mark.parametrize(("header", "wait"), [("0", 0.0), ("2", 2.0), ("2.5", 2.5), ("3600", 30.0), ("-1", 0.0)])
def test_retry_after_sets_the_wait(header: str, wait: float) -> None:
    core = Core("http://a", token=None, retry=RetryPolicy(retries=1), batch_runs=0)
    exchange = core.exchange("POST", "/v1/execute", BODY)
    assert isinstance(next(exchange), Send)
    step = exchange.send(httpx.Response(429, headers={"Retry-After": header}))
    assert step == Wait(wait)


def test_without_retry_after_the_backoff_doubles_with_jitter() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=5.0)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 5.0)]:
        assert all(0.75 * base <= policy.delay(attempt) <= 1.25 * base for _ in range(50))
    assert 0.75 <= policy.delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") <= 1.25  # a date: the backoff serves


def test_the_token_goes_with_every_request() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json=EXECUTED)

    with SandboxClient("http://a", token="s3cret", transport=httpx.MockTransport(handler)) as client:
        client.execute(BODY)
    assert seen == ["Bearer s3cret"]


def test_a_client_needs_a_url_and_sane_limits() -> None:
    with pytest.raises(ValueError, match="at least one URL"):
        SandboxClient([])
    with pytest.raises(ValueError, match="retries"):
        RetryPolicy(retries=-1)


GROUP = {"language": "python", "programs": ["print(1)"], "tests": [{"stdin": "", "expected_stdout": "1"}]}
EVALUATED = {"results": [], "wall_s": 0.0}


@pytest.mark.parametrize(("status", "again"), [(404, False), (405, False), (413, True), (422, True)])
def test_a_batch_the_server_refuses_goes_group_by_group(status: int, again: bool) -> None:
    """No batch route (404/405): batching stops for good; a batch too large (413/422): this one goes group by
    group and the next is tried again. Any other refusal is every group's error."""

    def server(paths: list[str]) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            paths.append(request.url.path)
            if request.url.path == "/v1/evaluate/batch":
                return httpx.Response(status, json={"detail": "no"})
            return httpx.Response(200, json=EVALUATED)

        return httpx.MockTransport(handler)

    batch_then = ["/v1/evaluate/batch"] if again else []
    expected = ["/v1/evaluate/batch", "/v1/evaluate", "/v1/evaluate", *batch_then, "/v1/evaluate", "/v1/evaluate"]
    paths: list[str] = []
    with SandboxClient("http://a", retry=FAST, transport=server(paths)) as client:
        for _ in range(2):
            assert all(r == EvaluateResponse(**EVALUATED) for r in client.evaluate_many([GROUP, GROUP]))
    assert paths == expected

    async def run() -> None:
        async with AsyncSandboxClient("http://a", retry=FAST, transport=server(async_paths)) as client:
            for _ in range(2):
                assert all(r == EvaluateResponse(**EVALUATED) for r in await client.evaluate_many([GROUP, GROUP]))

    async_paths: list[str] = []
    asyncio.run(run())
    assert async_paths == expected


def test_a_batch_refused_for_another_reason_is_each_groups_error() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(401, json={"detail": "missing bearer token"}))
    with SandboxClient("http://a", retry=FAST, transport=transport) as client:
        answers = client.evaluate_many([GROUP, GROUP])
    assert [type(a) for a in answers] == [SandboxRejected, SandboxRejected]


def test_an_evaluate_may_take_as_long_as_judging_its_tests_can() -> None:
    # A group of slow programs on many tests is still being judged past the client's own timeout: cut off there,
    # its programs would come back as the sandbox's failure (which a reward masks), hanging ones included.
    seen: list[float | None] = []
    answer = {"results": [], "wall_s": 0.0}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        if request.url.path == "/v1/execute":
            return httpx.Response(200, json=EXECUTED)
        batch = request.url.path.endswith("/batch")
        return httpx.Response(200, json={"responses": [answer, answer], "wall_s": 0.0} if batch else answer)

    tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(150)]
    group = {"language": "python", "programs": ["a", "b"], "tests": tests, "limits": {"timeout_s": 1.0}}
    per_group = 2 * (4 * 10.0 + 150 * (1.0 * 3 + 1.0))  # compile, then each test at its limit with the wait credit
    with SandboxClient("http://s", retry=FAST, timeout=60.0, transport=httpx.MockTransport(handler)) as client:
        client.evaluate(group)
        client.execute(BODY)

    small = {**group, "tests": tests[:20]}  # small enough to go in a batch (2 x 20 runs)

    async def main() -> None:
        transport = httpx.MockTransport(handler)
        async with AsyncSandboxClient("http://s", retry=FAST, timeout=60.0, transport=transport) as client:
            await client.evaluate(group)
            await client.evaluate_many([small, small])  # one batch of the two: the sum of both

    asyncio.run(main())
    per_small = 2 * (4 * 10.0 + 20 * (1.0 * 3 + 1.0))
    assert seen == [60.0 + per_group, 60.0, 60.0 + per_group, 60.0 + 2 * per_small], seen


def test_a_sessions_cell_may_take_its_limit_stretched_by_its_wait() -> None:
    from codegym_sandbox.client._core import judging_s

    # Its limit, twice that for CPU waits, three times that paused (its slot lent to cells that waited), 10 s.
    assert judging_s("/v1/sessions/s-1/execute", {"code": "1", "timeout_s": 20}) == 20 * 6 + 10
    assert judging_s("/v1/sessions/s-1/execute", {"code": "1"}) == 60 * 6 + 10  # the most a cell may ask
    assert judging_s("/v1/sessions", {"language": "python"}) == 0.0
