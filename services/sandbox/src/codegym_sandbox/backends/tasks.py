"""The host's task table: how many runs may be in flight so that their processes and threads fit in it.

Every process and thread of the host takes a pid from one table (``kernel.pid_max``) and counts against
``kernel.threads-max``; a pid namespace does not add pids, it only renames them. A run may hold up to its
process limit (``LIMITS__PROCESSES``, threads included) for its whole time limit while sleeping, and sleeping
runs are lent workers quickly, so ``MAX_WORKERS`` of them could otherwise fill the table: then every fork on the
host fails (neighbours' runs, new workers, the server, the host's own daemons). The server therefore lowers the
runs in flight (``max_workers``, and the fixed workers with it where needed) until all of them together, at
their process limit, leave the host a reserve (:func:`capacity`), after the tasks sessions may hold
(:func:`session_tasks`: every session there may be, at its process limit). Where the kernel offers it, each worker's
pids cgroup also holds a run to its process limit (``agent/run_cgroup.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from ..config import Settings

TABLES = ("/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max")
# An eighth of the table (at least RESERVE_MIN tasks) is left to the host: a host runs hundreds of tasks, and
# on the common pid_max of 32768 this still lets 112 runs of 256 processes be in flight, so that a burst of
# a hundred sleepers (SkyRL's) all start at once.
RESERVE_FRACTION = 8
RESERVE_MIN = 4096
CONTAINER_EXTRA = 64  # a container's own processes beside its run's (the agent, its box)
SESSION_EXTRA = 8  # a session container's own processes beside its kernel's (the agent, the box, the supervisor)

Reader = Callable[[str], "int | None"]


def read_number(path: str) -> int | None:
    """The number in a sysctl file, or None where it cannot be read."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def host_tasks(read: Reader = read_number) -> int | None:
    """The tasks the host may hold at once: the lower of its pid table and its thread limit (None: unknown)."""
    known = [n for n in map(read, TABLES) if n is not None and n > 0]
    return min(known) if known else None


def capacity(tasks: int) -> int:
    """What the runs in flight may hold of a table of ``tasks``: all of it less the host's reserve."""
    return max(tasks - max(tasks // RESERVE_FRACTION, RESERVE_MIN), 0)


def worker_tasks(settings: Settings, kind: str) -> int:
    """The tasks one worker's run may hold: its process limit (a container's pids limit on the engines)."""
    if kind == "local":
        return settings.limits.processes
    return settings.container_pids or settings.limits.processes + CONTAINER_EXTRA


def session_workers(settings: Settings) -> int:
    """The sessions' workers there may be at once: every session, and the kernels started ahead (which a
    session being made may not have taken yet)."""
    return settings.sessions.max_sessions + settings.sessions.warm


def session_tasks(settings: Settings, kind: str) -> int:
    """The tasks every session's worker there may be holds at most: its processes, and its worker's own (the
    agent, its box, the kernel's supervisor)."""
    extra = 3 if kind == "local" else SESSION_EXTRA
    return session_workers(settings) * (settings.sessions.processes + extra)


@dataclass(frozen=True)
class Slots:
    """The workers and the runs in flight the server uses, after the task table's bound."""

    workers: int  # always there
    most: int  # runs in flight at most (lent workers come on top of ``workers`` up to this)
    asked: int  # ``most`` as the settings ask for it
    tasks: int | None  # the host's task table (None: unknown, and nothing is lowered)
    per_run: int  # the tasks one run may hold

    @property
    def lowered(self) -> bool:
        return self.most < self.asked

    def describe(self) -> str:
        """The bound in words, for the capacity check and the start-up message."""
        if self.tasks is None:
            return "the host's task table is unknown (no /proc/sys/kernel/pid_max): runs in flight are not bound by it"
        room = f"{capacity(self.tasks)} of the host's {self.tasks} tasks (pid_max, threads-max) at {self.per_run} each"
        if not self.lowered:
            return f"{self.most} runs in flight fit in {room}"
        return f"runs in flight lowered from {self.asked} to {self.most} to fit in {room}"


def slots(settings: Settings, kind: str, read: Reader = read_number) -> Slots:
    """The workers and runs in flight for ``settings`` on a ``kind`` backend, within the host's task table."""
    workers = settings.workers or os.cpu_count() or 1
    asked = settings.max_workers or max(128, 4 * workers)
    per_run = worker_tasks(settings, kind)
    tasks = host_tasks(read)
    # Sessions hold their tasks for their whole life, idle or not: theirs come off the table first.
    held = session_tasks(settings, kind)
    room = None if tasks is None else max((capacity(tasks) - held) // per_run, 1)
    most = asked if room is None else min(asked, room)
    # Only the host's table lowers the fixed workers: a MAX_WORKERS below WORKERS leaves them as they are.
    return Slots(workers if room is None else min(workers, room), most, asked, tasks, per_run)
