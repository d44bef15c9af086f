"""The sandbox the trainer starts when no ``--sandbox-url`` is given (its command line), and the run's one way to
reach a sandbox (``RunSandbox``)."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest
from codegym_sandbox.client import RetryPolicy, SandboxUnavailable
from codegym_trainer.config import ConfigError, TrainConfig
from codegym_trainer.sandbox import RunSandbox, request_timeout_s, sandbox_argv


def test_sandbox_command_follows_the_flags() -> None:
    argv = sandbox_argv(TrainConfig(sandbox_backend="docker", sandbox_workers=3), 9999)
    assert argv[:1] == [sys.executable] and "--backend" in argv and "docker" in argv
    assert argv[argv.index("--workers") + 1] == "3" and argv[argv.index("--port") + 1] == "9999"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    with_python = sandbox_argv(TrainConfig(python_version=version), 9999)
    assert with_python[0] == "env" and with_python[1].startswith("CODEGYM_SANDBOX_PYTHON=")
    with pytest.raises(ConfigError, match=r"python9\.99"):
        sandbox_argv(TrainConfig(python_version="9.99"), 9999)


def test_every_client_of_a_run_takes_the_runs_settings() -> None:
    config = TrainConfig(sandbox_token="secret", concurrency=3, sandbox_retries=1, timeout_per_test=2.0)
    sandbox = RunSandbox.of(config, ["http://a", "http://b"])
    assert sandbox == RunSandbox(
        ("http://a", "http://b"), token="secret", concurrency=3, retries=1, timeout_per_test=2.0
    )
    scorer = sandbox.scorer()
    assert scorer.urls == ["http://a", "http://b"] and scorer.timeout_per_test == 2.0
    # A reward is a fresh run of every program: a result cache would pay a lucky guess again for every later
    # sample of the same text (and keep an unlucky honest one failed).
    assert scorer.cache is False
    assert scorer.ask_again.retry == sandbox.retry == RetryPolicy(retries=1)
    asyncio.run(scorer.aclose())
    seen: list[tuple[str, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url.host), request.headers.get("authorization")))
        return httpx.Response(503)  # retried once, on the next URL

    with sandbox.client(1.0, transport=httpx.MockTransport(answer)) as client, pytest.raises(SandboxUnavailable):
        client.languages()
    assert seen == [("a", "Bearer secret"), ("b", "Bearer secret")]
    assert request_timeout_s(2.0) == 80.0 and request_timeout_s(0.5) == 60.0  # a loose bound: it only ends a hang
    with pytest.raises(ValueError, match="at least one URL"):
        RunSandbox(())
