"""Shared fixtures: a real app (its lifespan starts the worker pool) driven in-process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """One app with two workers per test module: starting the pool costs a fraction of a second."""
    with TestClient(create_app(Settings(workers=2))) as c:
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
