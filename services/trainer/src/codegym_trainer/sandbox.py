"""The sandbox a run scores with: the URLs given, or a ``codegym-sandbox serve`` the trainer starts on loopback."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator

from codegym_evaluator.scoring import Scorer
from codegym_evaluator.servers import LoopbackServer, ServerError, free_port

from .config import ConfigError, TrainConfig


def sandbox_argv(config: TrainConfig, port: int) -> list[str]:
    """The command that serves a sandbox for this run (``env`` sets the interpreter of ``--python-version``)."""
    argv = [sys.executable, "-m", "codegym_sandbox.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--backend", config.sandbox_backend, "--log-level", "warning"]
    if config.sandbox_workers:
        argv += ["--workers", str(config.sandbox_workers)]
    if config.python_version:
        interpreter = shutil.which(f"python{config.python_version}")
        if interpreter is None:
            raise ConfigError(f"--python-version {config.python_version}: no python{config.python_version} on PATH")
        argv = ["env", f"CODEGYM_SANDBOX_PYTHON={interpreter}", *argv]
    return argv


@contextlib.contextmanager
def sandbox_urls(config: TrainConfig) -> Iterator[list[str]]:
    """The sandbox URLs to score with; a sandbox started here is stopped on leaving, whatever happened."""
    if config.sandbox_url:
        yield list(config.sandbox_url)
        return
    port = free_port()
    server = LoopbackServer("sandbox", sandbox_argv(config, port), port, "/readyz", start_timeout_s=90.0)
    try:
        server.start()
    except ServerError as exc:
        raise ConfigError(f"could not start a {config.sandbox_backend} sandbox: {exc}") from None
    try:
        yield [server.url]
    finally:
        server.stop()


def scorer_factory(config: TrainConfig, urls: list[str]) -> Scorer:
    """A scorer for ``urls`` with the run's limits, concurrency and retries."""
    return Scorer(
        urls,
        token=config.sandbox_token,
        concurrency=config.concurrency,
        retries=config.sandbox_retries,
        timeout_per_test=config.timeout_per_test,
        request_timeout_s=max(60.0, config.timeout_per_test * 40),
    )
