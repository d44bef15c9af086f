"""Fixtures of the security suite: a hardened test server on every backend, and the host canaries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .host_state import HostState
from .suite import BACKENDS, PROGRAM_HOST_UID, SERVER_SECRET, hostile_settings


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def host() -> Iterator[HostState]:
    """Canaries on the host that every attack is checked against."""
    state = HostState.create(PROGRAM_HOST_UID, SERVER_SECRET)
    try:
        yield state
    finally:
        state.remove()


@pytest.fixture(scope="module")
def hostile(backend: str, host: HostState) -> Iterator[TestClient]:
    """A server with one worker on ``backend``, for programs that attack it."""
    with TestClient(create_app(hostile_settings(backend, main=True)), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def pair(backend: str) -> Iterator[TestClient]:
    """Two workers: two runs at once, each in its own box."""
    with TestClient(create_app(hostile_settings(backend, workers=2)), raise_server_exceptions=False) as c:
        yield c
