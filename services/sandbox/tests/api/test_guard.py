"""Bearer token and body size limits, in front of every route."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from codegym_sandbox.api.guard import HELD_FACTORS, Guard, held_bytes
from codegym_sandbox.api.hosts import HostCheck, answered_hosts
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from codegym_sandbox.metrics import Metrics
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def guarded() -> Iterator[TestClient]:
    # No workers started ahead: /readyz is ready at once (it waits for them: see test_health.py).
    settings = Settings(backend="local", workers=1, reserve_workers=0, api_token=TOKEN, max_body_bytes=4096)
    with TestClient(create_app(settings)) as c:
        yield c


def test_token_required(guarded: TestClient) -> None:
    req = {"code": "print(1)", "language": "python"}
    r = guarded.post("/run_code", json=req)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert guarded.post("/run_code", json=req, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.post("/run_code", json=req, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert guarded.get("/v1/languages").status_code == 401
    ok = guarded.post("/run_code", json=req, headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.json()["run_result"]["stdout"] == "1\n"


def test_probes_stay_open(guarded: TestClient) -> None:
    assert guarded.get("/livez").status_code == 200
    assert guarded.get("/readyz").status_code == 200
    assert guarded.get("/v1/ping").status_code == 200
    assert guarded.get("/metrics").status_code == 200


def test_body_too_large(guarded: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = guarded.post("/run_code", json={"code": "#" + "x" * 5000, "language": "python"}, headers=auth)
    assert r.status_code == 413 and "4096" in r.json()["detail"]
    assert guarded.post("/run_code", json={"code": "1", "language": "python"}, headers=auth).status_code == 200


def test_chunked_body_too_large(guarded: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"code": "#'
        for _ in range(10):
            yield b"x" * 1000
        yield b'", "language": "python"}'

    auth = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    r = guarded.post("/run_code", content=chunks(), headers=auth)
    assert r.status_code == 413


POST_ROUTES = ["/run_code", "/run_jupyter", "/execute_batch", "/v1/execute", "/v1/evaluate", "/v1/evaluate/batch"]


def test_every_post_route_takes_json_alone(guarded: TestClient) -> None:
    """What a web page may send anywhere without asking (text/plain, a form, no type) runs nothing: 415."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = json.dumps({"code": "print(1)", "language": "python"})
    paths = guarded.get("/openapi.json", headers=auth).json()["paths"]
    routes = {path for path, operations in paths.items() if "post" in operations}
    assert set(POST_ROUTES) <= routes
    for route in routes:
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", "json"):
            r = guarded.post(route, content=body, headers={**auth, "Content-Type": kind})
            assert r.status_code == 415 and "application/json" in r.json()["detail"], (route, kind, r.text)
        assert guarded.post(route, content=body, headers=auth).status_code == 415, route
    for kind in ("application/json", "Application/JSON; charset=utf-8"):
        r = guarded.post("/run_code", content=body, headers={**auth, "Content-Type": kind})
        assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "1\n", kind
    assert guarded.post("/run_code", content=body, headers={"Content-Type": "text/plain"}).status_code == 401


@pytest.mark.parametrize(
    ("host", "allowed", "answered", "refused"),
    [
        ("127.0.0.1", [], ["localhost:8080", "127.0.0.1:8080", "[::1]:8080", "10.0.0.7", "a.localhost"], ["evil.test"]),
        ("localhost", ["Sandbox.Internal"], ["sandbox.internal:80", "LOCALHOST"], ["evil.test:8080", "localhost.evil"]),
        ("0.0.0.0", [], ["evil.test", "sandbox", "sandbox.ns.svc.cluster.local:8080"], []),
        ("0.0.0.0", ["sandbox"], ["sandbox:8080", "127.0.0.1:8080", "localhost"], ["evil.test", "sandbox.evil"]),
        ("127.0.0.1", ["*"], ["evil.test"], []),
    ],
)
def test_hosts_answered(host: str, allowed: list[str], answered: list[str], refused: list[str]) -> None:
    """Bound to loopback, a name that is not this machine's (DNS rebinding) is refused 421; bound beyond it, where
    a token is required, every name is answered unless ALLOWED_HOSTS lists them."""
    settings = Settings(
        backend="local", workers=1, reserve_workers=0, host=host, api_token=TOKEN, allowed_hosts=allowed
    )
    app = HostCheck(create_app(settings), answered_hosts(settings))
    with TestClient(app) as client:
        for name in answered:
            assert client.get("/livez", headers={"Host": name}).status_code == 200, name
        for name in refused:
            r = client.get("/livez", headers={"Host": name})
            assert r.status_code == 421 and "CODEGYM_SANDBOX_ALLOWED_HOSTS" in r.json()["detail"], name


def test_a_body_is_charged_as_it_comes_not_as_it_is_declared() -> None:
    """A head that declares a body holds nothing until the body comes (heads alone once filled the bound, and
    every honest request was refused); a chunked body is charged as it is read, before it grows further."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = Guard(app, None, max_body=1000, metrics=Metrics(), max_held=9000)  # 9000 bytes of bodies' charge

    async def request(
        parts: list[bytes], stall: asyncio.Event | None, length: int | None, path: str = "/v1/execute"
    ) -> tuple[int, int]:
        """The answer's status, and how many parts of the body were left unread."""
        headers = [(b"content-type", b"application/json")]
        headers += [] if length is None else [(b"content-length", str(length).encode())]
        scope = {"type": "http", "path": path, "method": "POST", "headers": headers, "client": ("c", 1)}
        queue = [{"type": "http.request", "body": p, "more_body": True} for p in parts]
        statuses: list[int] = []

        async def receive() -> Message:
            if queue:
                return queue.pop(0)
            if stall is not None:
                await stall.wait()  # the rest of the body never comes
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await guard(scope, receive, send)
        return (statuses[0] if statuses else 0), len(queue)

    async def scenario() -> list[tuple[int, int]]:
        stall = asyncio.Event()
        heads = [asyncio.create_task(request([], stall, 1000)) for _ in range(4)]  # heads only: nothing held
        heads += [asyncio.create_task(request([b"x" * 900], stall, 1000, "/livez"))]  # an open path: no body read
        await asyncio.sleep(0.01)
        honest = await request([b"y" * 900], None, 900)  # 5400 of 9000
        partial = asyncio.create_task(request([b"x" * 900], stall, 1000))  # 5400 held while the rest waits
        await asyncio.sleep(0.01)
        chunked = await request([b"z" * 200] * 5, None, None)  # 5400 + 4800 > 9000 at its fourth part
        stall.set()
        await asyncio.gather(*heads, partial)
        after = await request([b"y" * 900], None, 900)  # all released
        # 300 objects: far more than 900 bytes, and more than a client's share (6000) alone: it never fits
        values = await request([b"[" + b"{}," * 299 + b"{}]"], None, 900)
        return [honest, chunked, after, values]

    assert asyncio.run(scenario()) == [(200, 0), (503, 1), (200, 0), (413, 0)]
    assert held_bytes(b'[{"a":1},2]') == 6 * 11 + 32 * 3


def test_a_body_is_charged_at_the_width_of_its_widest_character() -> None:
    """Python keeps a str at the width of its widest character, and the JSON reader decodes a whole body to one:
    16 MiB of code with one character past U+FFFF in a comment held 8 times its bytes, charged 2."""
    held: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        held.append(guard.held_total)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = Guard(app, None, max_body=4000, metrics=Metrics(), max_held=1 << 20)

    async def post(*parts: bytes) -> None:
        headers = [(b"content-type", b"application/json")]
        scope = {"type": "http", "path": "/v1/execute", "method": "POST", "headers": headers, "client": ("c", 1)}
        queue = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]

        async def receive() -> Message:
            return queue.pop(0)

        async def send(message: Message) -> None:
            pass

        await guard(scope, receive, send)

    ascii_code = b'{"code": "' + b"x" * 1000
    bodies = [
        (ascii_code + b'"}',),
        (ascii_code, b'\\u00e9"}'),  # within Latin-1: one byte a character
        (ascii_code, b'\\u0100"}'),  # two
        (ascii_code, '# \U0001f600"}'.encode()),  # four, for the bytes before it too
        (ascii_code, b"# \\ud83d", b'\\ude00"}'),  # the same, escaped, in two parts
    ]
    for parts in bodies:
        asyncio.run(post(*parts))
    widths = [1, 1, 2, 4, 4]
    assert held == [HELD_FACTORS[w] * len(b"".join(p)) + 32 for w, p in zip(widths, bodies, strict=True)]


def test_a_relaying_route_is_counted_and_its_relay_is_not() -> None:
    """Round 60: ``/submit`` was not counted against its client's requests in flight (its relay to ``/v1/evaluate``
    was): one address held hundreds, each with its row's tests, waiting for the analysis pool before any relay. The
    route is counted now, and the request it makes as its caller's (``RELAYED``, which no client can set) is not."""
    from codegym_sandbox.api.guard import RELAYED

    gate = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        if scope["path"] == "/submit":
            await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = Guard(app, None, max_body=1000, metrics=Metrics(), max_client_requests=1)

    async def request(path: str, relayed: bool = False) -> int:
        headers = [(b"content-type", b"application/json")]
        scope = {"type": "http", "path": path, "method": "POST", "headers": headers, "client": ("c", 1)}
        scope |= {RELAYED: True} if relayed else {}
        statuses: list[int] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await guard(scope, receive, send)
        return statuses[0]

    async def scenario() -> list[int]:
        first = asyncio.create_task(request("/submit"))
        await asyncio.sleep(0.01)
        answers = [await request("/submit"), await request("/v1/evaluate", relayed=True)]
        gate.set()
        return [await first, *answers]

    first, second, relay = asyncio.run(scenario())
    assert (first, relay) == (200, 200) and second in (429, 504), (first, second, relay)  # 504: SandboxFusion's routes
