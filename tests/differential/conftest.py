"""One sandbox server (local backend, on loopback) for every differential test of a session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_evaluator.servers import sandbox_server


@pytest.fixture(scope="session")
def sandbox_url() -> Iterator[str]:
    with sandbox_server() as server:
        yield server.url
