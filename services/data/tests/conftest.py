"""Shared fixtures: one real sandbox server on loopback for the whole session (two workers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_evaluator.servers import sandbox_server


@pytest.fixture(scope="session")
def sandbox_url() -> Iterator[str]:
    """The URL of a codegym sandbox on 127.0.0.1 (local backend, two workers), stopped after the session."""
    with sandbox_server(workers=2) as server:
        yield server.url
