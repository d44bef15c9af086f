"""What every backend provides to the executor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..agent.protocol import Limits

if TYPE_CHECKING:
    from ..agent.session_frames import CellDone


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

    def __init__(self, run_mb: int, budget_mb: int, held_mb: int = 0) -> None:
        held = f" and {held_mb} MiB the server holds for it (its outputs, inputs and files)" if held_mb else ""
        super().__init__(
            f"a run asks for {run_mb} MiB of memory{held}, more than this server's whole memory budget "
            f"({budget_mb} MiB, MEMORY_BUDGET_MB): ask for a lower memory limit, or send less input and fewer "
            "files to fetch back"
        )
        self.run_mb = run_mb
        self.budget_mb = budget_mb


@dataclass(frozen=True)
class RunPolicy:
    """How one request's runs are served: built once by its route, passed down to every run it makes.

    It varies per request, so it travels as an argument, never as server state: two requests in flight at
    once each have their own.
    """

    # Whether steps may come from the result cache and go to it (``/run_code`` caches only when the server
    # is told to, as upstream runs every request; a native request may say ``cache: false``).
    cache: bool = True
    # How long a run may wait for memory and a worker (routes whose clients time out on their own): past it
    # the run is refused (``Saturated``) rather than left to run into the client's timeout. None: no bound.
    queue_wait_s: float | None = None
    # The request was admitted as a whole (:meth:`Backend.admit`): its runs skip the per-run queue check, so
    # that a group of thousands of runs is never refused halfway, with part of its runs done for nothing.
    admitted: bool = False
    # And how many of them may be in the pool at once, waiting for a worker or running (its window, shared by
    # its runs and its client's other admitted requests): the others wait their turn in the client's requests, so
    # that one request of thousands of runs, or many requests of one client, take turns with other clients' runs
    # rather than filling the queue for as long as they run.
    window: asyncio.Semaphore | None = field(default=None, compare=False)
    # Who the request came from (its address, as the per-client limits tell clients apart): whose turn its runs take
    # at the workers (``client_turns.py``) and, for a request of many runs, whose window it takes (one execution,
    # a compile and its run, has a window of its own). Empty: a client of its own for each run.
    client: str = ""


@dataclass
class RunRequest:
    """One program execution, as the agent protocol carries it."""

    files: dict[str, tuple[bytes, int]]  # name -> (content, mode)
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    stdin: bytes | None = None
    python: str | None = None  # script path when Python runs in-process
    collect: list[str] = field(default_factory=list)
    # The same files serve other requests too (the assert runner): a worker may keep a test series open for them.
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
    forked: bool = False  # run in a test series: forked from the process that compiled the program
    unparsed: bool = False  # its Python source did not compile, as the run's process found before any of it ran


class SessionLease(Protocol):
    """A session's worker and memory (``session_lease.py``): its cells, one at a time, and its end."""

    async def put_files(self, files: dict[str, tuple[bytes, int]]) -> None: ...

    async def cell(self, message: bytes, wall_s: float) -> tuple[CellDone, bytes]: ...

    async def close(self, busy: bool = False) -> None: ...

    def demand_s(self) -> float | None:
        """What its processes have run or waited to run, in seconds (as a run's worker: lending measures it)."""
        ...

    def pause(self, paused: bool) -> None:
        """Pause its running cell (every process of it stopped, its time standing still), or continue it."""
        ...

    @property
    def worker(self) -> object:
        """The worker it runs on (a fork's copies share one)."""
        ...


class MemoryShare(Protocol):
    """What the server sets on a backend's memory budget (``memory.MemoryBudget``), and what the server holds
    for runs after their end takes of it (``judging/off_loop.py``)."""

    total_mb: int

    async def acquire(
        self, mb: int, wait_s: float | None = None, share_mb: int | None = None, extra_mb: int = 0, client: str = ""
    ) -> Any:
        """A share of ``mb``, once the runs and shares before it leave room, in ``client``'s turn (see
        ``memory.MemoryBudget``)."""
        ...

    def release(self, lease: Any) -> None:
        """Give back what :meth:`acquire` took."""
        ...


class Backend(Protocol):
    """A backend as the server wires it and the executor runs on it (every pool of workers is one)."""

    name: str
    size: int  # workers always there
    max_workers: int  # lent workers come on top of ``size`` up to this (set by the server)
    reserve_workers: int | None  # lent workers to keep started ahead (set by the server; None: as many as fit)
    session_slot_count: int  # sessions' workers there may be at once (set by the server: SESSIONS__MAX_SESSIONS)
    breaker_cooldown_s: float  # how long a slot whose restarts keep failing waits before the next try
    # Charged to the memory budget for a run whose limits carry no memory bound of their own.
    unbudgeted_run_mb: int
    # Gives back the reservation of the programs' uids once stopped (set by the server: ``program_users.py``).
    release_uids: Callable[[], None] | None
    # What each worker (a container) costs the host beside the limits it serves, charged with a session's memory
    # (``worker_cost.py``; known once started).
    worker_cost_mb: int

    @property
    def memory(self) -> MemoryShare:
        """The budget every run takes its memory limit from."""
        ...

    @property
    def busy(self) -> int:
        """Runs on a worker now."""
        ...

    @property
    def waiting(self) -> int:
        """Runs that wait: for their share of the memory budget, or for a worker."""
        ...

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

    def admit(self, policy: RunPolicy, alone: bool = False) -> RunPolicy:
        """``policy`` for a request admitted with all its runs (in its client's window; ``alone``: one execution,
        in a window of its own), or raise :class:`Saturated` while the queue is full."""
        ...

    async def run(self, request: RunRequest, policy: RunPolicy) -> RunOutcome: ...

    async def run_tests(self, request: RunRequest, stdins: list[bytes | None], policy: RunPolicy) -> list[RunOutcome]:
        """``request``'s program once for each input, as separate runs (``request.stdin`` is not used)."""
        ...

    def computing(
        self, cell: SessionLease, pausable: bool = True, limit_s: float = 0.0, client: str = ""
    ) -> AbstractAsyncContextManager[None]:
        """One of the pool's own slots (never a lent one) held while a session's cell runs on ``cell`` (its
        worker): cells and runs compute from one queue, in their clients' turns (``client``: the session's), a
        cell that sleeps leaves the CPUs to runs, and one seen asleep while cells wait lends its slot to one of
        them, paused until that one ends (``pausable``: a cell; a fork's copying is not), for a share of its limit
        ``limit_s`` at most."""
        ...

    async def open_session(self, request: RunRequest, memory_mb: int) -> SessionLease:
        """A session's lease: a worker of its own, outside the slots, holding ``request``'s kernel, and
        ``memory_mb`` of the memory budget for its life (:class:`Saturated` when the budget has no room)."""
        ...

    @property
    def fork_refusal(self) -> str | None:
        """Why this backend forks no session; None where it does."""
        ...

    async def fork_session(
        self, lease: SessionLease, n: int, reseed: bool, memory_mb: int, cpu_s: float
    ) -> list[SessionLease]:
        """Fork ``lease``'s session into ``n`` copies: its own next lease, then the copies' (``session_family``);
        ``cpu_s``: the CPU time of the session's life, which its copies' lives go on with."""
        ...

    def status(self) -> dict[str, Any]: ...
