"""Shared fixtures: a real app (its lifespan starts the worker pool) driven in-process, on every backend.

Tests that take ``client`` run once per backend: local, and docker and podman where an engine with the
runtime image answers (``scripts/test`` installs and builds them when it can). A container backend that
cannot start is skipped with the reason, loudly: ``CODEGYM_TEST_REQUIRE_CONTAINERS=1`` (set by CI) turns
that skip into a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import BACKENDS, settings_for


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def client(backend: str) -> Iterator[TestClient]:
    """One app with two workers per test module and backend: starting a pool costs under a second."""
    with TestClient(create_app(settings_for(backend))) as c:
        yield c
