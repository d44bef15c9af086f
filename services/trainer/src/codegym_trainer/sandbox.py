"""The sandbox a run scores with: the URLs given, or a ``codegym-sandbox serve`` the trainer starts on loopback.

:class:`RunSandbox` is the one way the trainer reaches it: every client the run makes (the reward's and the
held-out evaluation's ``Scorer``, a rollout's through the seam's ``TrainerContext.sandbox``, the code-output
game's runs, ``--tools``' environments) takes its URLs, token, timeouts, retries and concurrency from here.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.servers import LoopbackServer, ServerError, free_port
from codegym_sandbox.client import RetryPolicy, SandboxClient

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


def request_timeout_s(run_timeout_s: float) -> float:
    """How long a client waits for one answer whose runs take up to ``run_timeout_s`` each: a request may
    carry many tests and wait in the sandbox's queue behind others, so the bound is loose; it only ends a hang."""
    return max(60.0, run_timeout_s * 40)


@dataclass(frozen=True)
class RunSandbox:
    """The run's sandbox and the client settings every part of the run reaches it with.

    ``urls`` (requests spread over them), ``token``, ``concurrency`` (requests in flight per client),
    ``retries`` (of a request the sandbox could not answer, and of a program that came back SE) and
    ``timeout_per_test`` (a run's limit where the caller sets none). Clients are made per use: a ``Scorer``
    lives on one event loop, so each caller opens its own and closes it.
    """

    urls: tuple[str, ...]
    token: str | None = None
    concurrency: int = 8
    retries: int = 3
    timeout_per_test: float = 5.0

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("a run's sandbox needs at least one URL")
        if self.concurrency < 1 or self.retries < 0:
            raise ValueError("concurrency must be >= 1 and retries >= 0")

    @classmethod
    def of(cls, config: TrainConfig, urls: Sequence[str]) -> RunSandbox:
        """The sandbox at ``urls`` with the run's settings (``--sandbox-token``, ``--concurrency``,
        ``--sandbox-retries``, ``--timeout-per-test``)."""
        return cls(
            tuple(urls),
            token=config.sandbox_token,
            concurrency=config.concurrency,
            retries=config.sandbox_retries,
            timeout_per_test=config.timeout_per_test,
        )

    @property
    def retry(self) -> RetryPolicy:
        """When a request (or a program that came back SE) is asked again."""
        return RetryPolicy(retries=self.retries)

    def scorer(self) -> Scorer:
        """A new ``Scorer`` (async; judges completions of tasks), to use in one event loop and close. It asks for a
        fresh run of every program, as ``CodeReward`` does: from the sandbox's result cache, a program whose
        answer was a lucky guess once (``os.urandom``, the time) would be paid again for every later sample of
        the same text, with no variance to learn from."""
        return Scorer(
            list(self.urls),
            token=self.token,
            concurrency=self.concurrency,
            retries=self.retries,
            timeout_per_test=self.timeout_per_test,
            request_timeout_s=request_timeout_s(self.timeout_per_test),
            cache=False,
        )

    def client(self, run_timeout_s: float, *, transport: httpx.BaseTransport | None = None) -> SandboxClient:
        """A new blocking client for single runs of up to ``run_timeout_s``; ``transport`` for a test."""
        return SandboxClient(
            list(self.urls),
            token=self.token,
            timeout=request_timeout_s(run_timeout_s),
            retry=self.retry,
            transport=transport,
        )


def scorer_factory(config: TrainConfig, urls: list[str]) -> Scorer:
    """A scorer for ``urls`` with the run's limits, concurrency and retries (:meth:`RunSandbox.scorer`)."""
    return RunSandbox.of(config, urls).scorer()
