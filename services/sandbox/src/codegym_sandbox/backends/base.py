"""What every backend provides to the executor."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol


class SandboxFault(Exception):
    """The infrastructure failed a run (never the program's fault): reported as SandboxError / SE."""


class Saturated(Exception):
    """Every worker is busy and the wait queue is full, or a run waited for a worker as long as it may: the
    caller should retry later."""

    def __init__(self, retry_after_s: int, waited_s: float | None = None) -> None:
        if waited_s is None:
            super().__init__("all sandbox workers are busy and the queue is full")
        else:
            super().__init__(f"all sandbox workers stayed busy for {waited_s:g} s")
        self.retry_after_s = retry_after_s


class TooLarge(Exception):
    """One run asks for more memory than the server's whole memory budget: it could never start (a 4xx)."""

    def __init__(self, run_mb: int, budget_mb: int) -> None:
        super().__init__(
            f"a run asks for {run_mb} MiB of memory, more than this server's whole memory budget "
            f"({budget_mb} MiB, MEMORY_BUDGET_MB): ask for less"
        )
        self.run_mb = run_mb
        self.budget_mb = budget_mb


@dataclass
class RunRequest:
    """One program execution, as the agent protocol carries it."""

    files: dict[str, tuple[bytes, int]]  # name -> (content, mode)
    argv: list[str]
    env: dict[str, str]
    limits: dict[str, Any]
    stdin: bytes | None = None
    python: str | None = None  # script path when Python runs in-process
    collect: list[str] = field(default_factory=list)
    # The same files serve other requests too (the assert runner): a worker may keep a session open for them.
    shared: bool = False


@dataclass
class RunOutcome:
    """What came back: exit status, resource use and output."""

    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float | None
    max_rss_kb: int | None
    timed_out: bool
    output_exceeded: bool
    stdout: bytes
    stderr: bytes
    launch_error: str | None = None
    collected: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    forked: bool = False  # run in a session: forked from the process that compiled the program


class Backend(Protocol):
    name: str

    @property
    def runtime_id(self) -> str:
        """What distinguishes this backend's results from another's: part of every cache key."""
        ...

    @property
    def tools(self) -> dict[str, str | None]:
        """Tool name -> where runs find it (None: not installed), as the workers see it."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def admitted(self) -> AbstractContextManager[None]:
        """Admit one request with all its runs, or raise :class:`Saturated` while the queue is full."""
        ...

    async def run(self, request: RunRequest) -> RunOutcome: ...

    async def run_tests(self, request: RunRequest, stdins: list[bytes | None]) -> list[RunOutcome]:
        """``request``'s program once for each input, as separate runs (``request.stdin`` is not used)."""
        ...

    def status(self) -> dict[str, Any]: ...
