"""Fixtures of the trainer's tests: a real sandbox (in-process or a loopback server) and a tiny model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.servers import LoopbackServer, sandbox_server
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from tiny_model import build_tiny_model


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sandbox_app() -> AsyncIterator[httpx.ASGITransport]:
    """An ASGI transport to a running sandbox app on the local backend with two workers."""
    app = create_app(Settings(backend="local", workers=2))
    async with app.router.lifespan_context(app):
        yield httpx.ASGITransport(app=app)


@pytest.fixture
def sandbox_process() -> Iterator[LoopbackServer]:
    """A real ``codegym-sandbox serve`` on a free loopback port (local backend, two workers)."""
    with sandbox_server(workers=2, backend="local") as server:
        yield server


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama and its BPE tokenizer, built once for the session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
