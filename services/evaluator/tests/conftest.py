"""Shared fixtures: a real sandbox app (its lifespan starts the worker pool), reached in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sandbox() -> AsyncIterator[httpx.ASGITransport]:
    """An ASGI transport to a running sandbox app on the local backend with two workers."""
    app = create_app(Settings(backend="local", workers=2))
    async with app.router.lifespan_context(app):
        yield httpx.ASGITransport(app=app)
