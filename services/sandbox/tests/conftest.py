"""Shared fixtures: a real app (its lifespan starts the worker pool) driven in-process, on every backend.

Tests that take ``client`` run once per backend: local, and docker and podman where an engine with the
runtime image answers (``scripts/test`` installs and builds them when it can). A container backend that
cannot start is skipped with the reason, loudly: ``CODEGYM_TEST_REQUIRE_CONTAINERS=1`` (set by CI) turns
that skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.backends.choose import docker_problem, podman_problem
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

IMAGE = os.environ.get("CODEGYM_SANDBOX_IMAGE", "codegym-sandbox-runtime:latest")
BACKENDS = [b for b in os.environ.get("CODEGYM_TEST_BACKENDS", "local,docker,podman").split(",") if b]


def backend_problem(backend: str) -> str | None:
    if backend == "docker":
        return docker_problem(IMAGE)
    if backend == "podman":
        return podman_problem("podman", IMAGE)
    return None


def settings_for(backend: str, **overrides: Any) -> Settings:
    """Settings of a test server on ``backend``; skips (or fails, under CI) when it cannot run here."""
    problem = backend_problem(backend)
    if problem is not None:
        message = f"NO {backend.upper()} BACKEND IN THIS RUN: {problem}"
        if os.environ.get("CODEGYM_TEST_REQUIRE_CONTAINERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Settings(backend=backend, image=IMAGE, **{"workers": 2, **overrides})  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def client(backend: str) -> Iterator[TestClient]:
    """One app with two workers per test module and backend: starting a pool costs under a second."""
    with TestClient(create_app(settings_for(backend))) as c:
        yield c


def run_code(client: TestClient, code: str, language: str = "python", **fields: Any) -> dict[str, Any]:
    """``POST /run_code`` that must answer 200; the JSON body."""
    r = client.post("/run_code", json={"code": code, "language": language, **fields})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def stdout(body: dict[str, Any]) -> str:
    out: str = body["run_result"]["stdout"]
    return out
