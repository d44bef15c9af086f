"""The sandbox the trainer starts when no ``--sandbox-url`` is given: its command line."""

from __future__ import annotations

import sys

import pytest
from codegym_trainer.config import ConfigError, TrainConfig
from codegym_trainer.sandbox import sandbox_argv


def test_sandbox_command_follows_the_flags() -> None:
    argv = sandbox_argv(TrainConfig(sandbox_backend="docker", sandbox_workers=3), 9999)
    assert argv[:1] == [sys.executable] and "--backend" in argv and "docker" in argv
    assert argv[argv.index("--workers") + 1] == "3" and argv[argv.index("--port") + 1] == "9999"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    with_python = sandbox_argv(TrainConfig(python_version=version), 9999)
    assert with_python[0] == "env" and with_python[1].startswith("CODEGYM_SANDBOX_PYTHON=")
    with pytest.raises(ConfigError, match=r"python9\.99"):
        sandbox_argv(TrainConfig(python_version="9.99"), 9999)
