"""Who may use the sandbox, and how much: the bearer token, per-client concurrency, slow clients.

The token tests run a real ``codegym-sandbox serve`` process and read everything it logged.
"""

from __future__ import annotations

import json
import resource
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import hostile_settings, metric_value

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import CLI, ServerProcess  # the same real-server helper the load test uses

TOKEN = f"tok-{secrets.token_hex(16)}"


@pytest.fixture(scope="module")
def guarded() -> Iterator[ServerProcess]:
    server = ServerProcess(
        {"CODEGYM_SANDBOX_API_TOKEN": TOKEN, "CODEGYM_SANDBOX_WORKERS": "1", "CODEGYM_SANDBOX_BACKEND": "local"},
        ["--log-level", "debug"],
    )
    try:
        yield server.start()
    finally:
        server.stop()
        server.log.unlink(missing_ok=True)


def test_token_enforced_and_never_logged(guarded: ServerProcess) -> None:
    url = guarded.url
    body = {"language": "python", "code": "print('ok')"}
    assert httpx.post(f"{url}/run_code", json=body).status_code == 401
    assert httpx.post(f"{url}/run_code", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(f"{url}/v1/execute", json=body, headers={"Authorization": TOKEN}).status_code == 401
    assert httpx.get(f"{url}/v1/languages", headers={"Authorization": f"Bearer {TOKEN[:-1]}"}).status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    ok = httpx.post(f"{url}/v1/execute", json=body, headers=auth)
    assert ok.status_code == 200 and ok.json()["run"]["stdout"] == "ok\n"
    # Errors that a server might log with their request: a bad body, a program that reads its environment.
    assert httpx.post(f"{url}/v1/execute", content=b"{bad", headers={**auth, "content-type": "x"}).status_code == 415
    bad = httpx.post(f"{url}/v1/execute", content=b"{bad", headers={**auth, "content-type": "application/json"})
    assert bad.status_code == 422
    env = httpx.post(
        f"{url}/v1/execute", json={"language": "python", "code": "import os; print(os.environ)"}, headers=auth
    )
    assert TOKEN not in env.text
    # A program cannot reach the server that runs it (its API and metrics share this port).
    probe = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {guarded.port}), timeout=1)\n"
    probe += "    print('reached')\nexcept OSError:\n    print('refused')\n"
    own = httpx.post(f"{url}/v1/execute", json={"language": "python", "code": probe}, headers=auth)
    assert own.json()["run"]["stdout"] == "refused\n", own.text
    # Health and metrics stay open, and do not show the token either.
    for path in ("/livez", "/readyz", "/metrics", "/v1/ping"):
        r = httpx.get(f"{url}{path}")
        assert r.status_code == 200 and TOKEN not in r.text, path
    guarded.stop()
    log = guarded.log.read_text()
    assert "GET" in log or "POST" in log or "backend" in log, "the server logged nothing: this test proves nothing"
    assert TOKEN not in log and TOKEN[4:20] not in log


def test_non_loopback_bind_needs_a_token() -> None:
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(CLI), "serve", "--host", "0.0.0.0", "--port", "1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "CODEGYM_SANDBOX_API_TOKEN" in done.stderr, done.stderr


def test_per_client_in_flight_limit() -> None:
    settings = hostile_settings("local", workers=1, max_client_requests=2)
    slow = {"language": "python", "code": "import time\ntime.sleep(0.8)\nprint('slept')", "limits": {"timeout_s": 3}}
    with TestClient(create_app(settings)) as client:

        def post(i: int) -> httpx.Response:
            return client.post("/v1/execute", json={**slow, "code": slow["code"] + f"  # {i}"})

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(post, i) for i in range(6)]
            time.sleep(0.3)
            probe = client.get("/readyz")  # health stays open while the client is at its limit
            answers = [f.result() for f in futures]
        codes = sorted(r.status_code for r in answers)
        assert codes.count(200) == 2 and codes.count(429) == 4, codes
        for r in answers:
            if r.status_code == 429:
                assert r.headers["retry-after"] == "1" and "in flight" in r.json()["detail"]
            else:
                assert r.json()["run"]["stdout"] == "slept\n"
        assert probe.status_code == 200
        after = client.post("/v1/execute", json={"language": "python", "code": "print('free again')"})
        assert after.status_code == 200 and after.json()["run"]["stdout"] == "free again\n"


@pytest.mark.parametrize(("per_client", "refused"), [(64, 429), (0, 503)])
def test_the_bodies_held_at_once_are_bounded(per_client: int, refused: int) -> None:
    """Bodies wait with their requests (for a worker, a session's turn): counted as requests alone, one client's
    could hold MAX_CLIENT_REQUESTS x MAX_BODY_BYTES. Here a client may hold one 200 KiB body's charge (a quarter of
    the server's bytes, or one largest body), and the server two."""
    settings = hostile_settings("local", workers=1, max_client_requests=per_client)
    settings.max_body_bytes, settings.max_held_bodies_mb = 256 << 10, 3  # a body's charge: 6 times its bytes
    pad = "#" * (200 << 10)
    slow = {"language": "python", "code": f"import time\ntime.sleep(0.8)\nprint('slept')\n{pad}", "cache": False}
    with TestClient(create_app(settings)) as client, ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: client.post("/v1/execute", json=slow), range(3)))
        codes = sorted(r.status_code for r in answers)
        assert codes == ([200, 429, 429] if per_client else [200, 200, 503]), codes
        for r in answers:
            if r.status_code == refused:
                assert r.headers["retry-after"] == "1" and "bodies" in r.json()["detail"], r.text
        after = client.post("/v1/execute", json={**slow, "code": "print('free again')"})  # released at the answer
        assert after.status_code == 200 and after.json()["run"]["stdout"] == "free again\n"


def test_slow_clients_do_not_block_others() -> None:
    server = ServerProcess(
        {"CODEGYM_SANDBOX_WORKERS": "1", "CODEGYM_SANDBOX_BACKEND": "local"}, ["--log-level", "warning"]
    ).start()
    crawlers = []
    try:
        # Half a request each: headers that never end, and a body that never comes.
        for i in range(40):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if i % 2:
                s.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:
                head = b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                s.sendall(head + b'Content-Length: 100000\r\n\r\n{"code": "')
            crawlers.append(s)
        started = time.monotonic()
        r = httpx.post(f"{server.url}/run_code", json={"language": "python", "code": "print(7)"}, timeout=10)
        assert r.status_code == 200 and json.loads(r.text)["run_result"]["stdout"] == "7\n"
        assert time.monotonic() - started < 5
    finally:
        for s in crawlers:
            s.close()
        server.stop()
        server.log.unlink(missing_ok=True)


def _closed(s: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``s`` within ``within_s``."""
    s.settimeout(within_s)
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_slow_heads_cannot_lock_out_clients() -> None:
    """Slowloris: connections that never finish their request head reach no token check, and each holds a
    descriptor. With the server's descriptors a few hundred, 600 of them took all: /readyz and clients with the
    token were refused. Now at most a bound of them wait (the longest-waiting closed first), each for a deadline."""
    env = {
        "CODEGYM_SANDBOX_API_TOKEN": TOKEN,
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_SANDBOX_WORKERS": "1",
        "CODEGYM_SANDBOX_MAX_WORKERS": "1",
        "CODEGYM_SANDBOX_RESERVE_WORKERS": "0",
        "CODEGYM_SANDBOX_HEADER_TIMEOUT_S": "3",
        "CODEGYM_SANDBOX_MAX_WAITING_CONNECTIONS": "40",
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start()
    crawlers: list[socket.socket] = []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        room = server.open_fds() + 250
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (room, room))
        for i in range(600):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if i % 2:
                s.sendall(b"POST /run_code HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            crawlers.append(s)
        time.sleep(1)
        assert server.open_fds() < room - 20
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{server.url}/readyz").status_code == 200
            r = client.post(f"{server.url}/run_code", json={"language": "python", "code": "print(7)"}, headers=auth)
            assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "7\n"
            assert all(_closed(s, 8) for s in crawlers)  # the deadline, 3 s, closes those the bound left
            metrics = client.get(f"{server.url}/metrics").text
        dropped = {
            why: metric_value(metrics, f'codegym_sandbox_dropped_connections_total{{reason="{why}"}}')
            for why in ("crowded", "deadline")
        }
        assert dropped["crowded"] >= 400 and dropped["crowded"] + dropped["deadline"] == 600, dropped
    finally:
        for s in crawlers:
            s.close()
        server.stop()
        server.log.unlink(missing_ok=True)


def test_web_pages_cannot_run_code() -> None:
    """A page the machine's browser opens may POST text/plain, a form or a bare body anywhere, and may rebind its
    own host name to 127.0.0.1: a server without a token takes JSON alone, from the hosts it answers for."""
    env = {
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_SANDBOX_WORKERS": "1",
        "CODEGYM_SANDBOX_RESERVE_WORKERS": "0",
        "CODEGYM_SANDBOX_ALLOWED_HOSTS": '["sandbox.internal"]',
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start()
    body = json.dumps({"language": "python", "code": "print('ran')"})
    page = {"Origin": "http://attacker.example", "Host": f"localhost:{server.port}"}
    try:
        with httpx.Client(timeout=10) as client:
            url = f"{server.url}/run_code"
            for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
                r = client.post(url, content=body, headers={**page, "Content-Type": kind})
                assert r.status_code == 415 and "application/json" in r.json()["detail"], (kind, r.text)
            assert client.post(url, content=body, headers=page).status_code == 415  # no Content-Type at all
            for host in ("attacker.example", f"attacker.example:{server.port}", "localhost.attacker.example"):
                r = client.post(url, content=body, headers={"Host": host, "Content-Type": "application/json"})
                assert r.status_code == 421 and "ALLOWED_HOSTS" in r.json()["detail"], (host, r.text)
                assert client.get(f"{server.url}/metrics", headers={"Host": host}).status_code == 421
            for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "[::1]", "sandbox.internal:80"):
                r = client.post(url, content=body, headers={"Host": host, "Content-Type": "application/json"})
                assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "ran\n", (host, r.text)
    finally:
        server.stop()
        server.log.unlink(missing_ok=True)
