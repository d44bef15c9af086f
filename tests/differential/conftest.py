"""One sandbox server (local backend, on loopback) for every differential test of a session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from codegym_evaluator.servers import sandbox_server

from .generative import COUNTS


@pytest.fixture(scope="session")
def sandbox_url() -> Iterator[str]:
    with sandbox_server() as server:
        yield server.url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The generative layer's counts: what it drew, by kind, form and language."""
    if COUNTS:
        terminalreporter.write_line("generative layer: " + ", ".join(f"{k} {n}" for k, n in sorted(COUNTS.items())))
