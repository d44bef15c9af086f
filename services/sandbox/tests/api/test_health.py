"""Probes and Prometheus metrics."""

from __future__ import annotations

import time

from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import metric_value, run_code, settings_for


def test_livez(client: TestClient) -> None:
    r = client.get("/livez")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_readyz(client: TestClient, backend: str) -> None:
    r = client.get("/readyz")
    body = r.json()
    assert r.status_code == 200 and body["ready"] is True
    assert body["backend"] == backend and body["workers"] == 2 and body["alive"] == 2
    assert body["backend_reason"]


def test_readyz_waits_for_the_workers_started_ahead_for_lending() -> None:
    """Not ready (503, ``warming``) until start-up has parked the reserve, then ready for good: a burst of
    sleepers sent the moment the server is ready finds its workers started (``backends/lending.py``)."""
    settings = settings_for("local", workers=1, max_workers=40, reserve_workers=24)
    with TestClient(create_app(settings)) as client:
        answers = []
        while not answers or answers[-1][0] != 200:
            r = client.get("/readyz")
            answers.append((r.status_code, r.json()["warming"], r.json()["parked"]))
            time.sleep(0.005)
        assert answers[0][:2] == (503, True)  # 24 workers take more than this to start
        assert all(code == 503 and warming and parked < 24 for code, warming, parked in answers[:-1])
        assert answers[-1] == (200, False, 24)
        assert run_code(client, "import time; time.sleep(0.2)")["status"] == "Success"
        body = client.get("/readyz").json()
        assert body["ready"] and body["reserve"] == 24 and not body["warming"]


def test_metrics_count_runs_cache_and_latency(client: TestClient) -> None:
    code = {"language": "python", "code": "print('metrics')"}
    client.post("/v1/execute", json=code)
    client.post("/v1/execute", json=code)
    client.post("/run_code", json={"language": "python", "code": "raise SystemExit(4)"})
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert metric_value(text, 'codegym_sandbox_runs_total{language="python",verdict="AC"}') >= 1
    assert metric_value(text, 'codegym_sandbox_runs_total{language="python",verdict="RE"}') >= 1
    assert metric_value(text, 'codegym_sandbox_cache_total{result="hit"}') >= 1
    assert metric_value(text, 'codegym_sandbox_cache_total{result="miss"}') >= 2
    assert metric_value(text, 'codegym_sandbox_run_seconds_count{kind="run",language="python"}') >= 2
    assert 'codegym_sandbox_run_seconds_bucket{kind="run",language="python",le="0.5"}' in text
    assert metric_value(text, 'codegym_sandbox_requests_total{route="/v1/execute",status="200"}') >= 2
    assert metric_value(text, 'codegym_sandbox_requests_total{route="/run_code",status="200"}') >= 1
    assert metric_value(text, "codegym_sandbox_workers") == 2
    assert metric_value(text, "codegym_sandbox_queue_depth") == 0
    assert metric_value(text, "codegym_sandbox_busy_workers") == 0
    assert "codegym_sandbox_rejected_total" in text
