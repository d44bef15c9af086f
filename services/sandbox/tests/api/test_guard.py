"""Bearer token and body size limits, in front of every route."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

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
