"""The local backend: a pool of agent processes on this host, isolated with Linux namespaces.

Each slot is one long-lived agent (``python -m codegym_sandbox.agent``) spoken to over its stdin and
stdout; the agent enters its own user, mount and network namespaces and runs every program in a box of
its own (see ``agent/isolation.py``). No container engine is needed: this is the embedded default.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .pool import WorkerPool
from .worker import AgentWorker, ProcessWorker


def agent_env() -> dict[str, str]:
    """The agent's environment, which every Python run inherits: small, fixed and deterministic."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": src,
        "PYTHONHASHSEED": "0",  # the same program prints the same set order on every worker
        "PYTHONDONTWRITEBYTECODE": "1",
        "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MiB of address space per thread arena otherwise
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class LocalBackend(WorkerPool):
    """Agents as child processes of the server."""

    name = "local"

    def __init__(self, workers: int, queue_size: int, config: dict[str, Any], python: str | None = None) -> None:
        super().__init__(workers, queue_size, config)
        self.python = python or sys.executable

    def make_worker(self, slot: int) -> AgentWorker:
        argv = [self.python, "-s", "-m", "codegym_sandbox.agent"]
        return ProcessWorker(slot, self.config, argv, agent_env())
