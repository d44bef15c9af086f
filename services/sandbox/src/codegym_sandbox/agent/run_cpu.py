"""The CPU time of a whole run: every process it forked, running, exited or reaped, by anyone or by nobody.

``RLIMIT_CPU`` bounds each process on its own: a program that forks a fresh child (whose count starts at
zero) when its limit's warning arrives, or spreads its work over a chain of processes, would escape it.
The box therefore holds the run's tree to the same limit, by the kernel's count: the CPU time of the
cgroup its processes are in (see ``run_cgroup.py``), which no process leaves and no exit escapes. Where
there is no such cgroup, by a sum: the processes it can see in ``/proc`` (their own time, and that of the
children they reaped), and those it reaped itself (its ``RUSAGE_CHILDREN``: it is the init of the run's
pid namespace, or its subreaper, so every orphan comes to it); a process the kernel reaps (its parent
ignores ``SIGCHLD``) is in neither. The per-process limit stays, as a backstop, and it is what stops an
honest single-process program, exactly as before.
"""

from __future__ import annotations

import os
import resource
import time

from .protocol import Limits
from .run_cgroup import RunCgroup

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIN_CHECK_S = 0.05  # the shortest time between two sums of a run's CPU time while it runs


def cpu_limit_s(limits: Limits) -> int:
    """A run's CPU-time limit in whole seconds: what ``RLIMIT_CPU`` (whole seconds) gives each process."""
    return max(1, int(limits["cpu_s"] + 0.999))


def reaped_cpu_s() -> float:
    """CPU time of the processes this one has reaped (and of those they reaped), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def living_cpu_s(supervisors: set[str]) -> tuple[float, int]:
    """CPU time of every process in ``/proc`` but ``supervisors`` (zombies too), with that of the children
    they reaped; and how many threads they have."""
    ticks = threads = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or name in supervisors:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])  # utime .. cstime
            threads += int(fields[17])  # num_threads
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return ticks / _CLOCK_TICKS, threads


class CpuWatch:
    """Stops a run whose processes together pass its CPU-time limit.

    Made before the run starts: with a cgroup (``meter``), its count then is the run's zero. Read only when
    the run could first have reached the limit: no sooner than its CPU time left, spent on every CPU it may
    use at once (never more than its threads, which a sum counts), so a run that ends within its time is
    seldom read at all. Between two reads a run may go past the limit: the count at its end (see
    :meth:`used_at_end`, :meth:`over_at_end`) catches what the last one missed.
    """

    def __init__(self, limits: Limits, cpus: int, supervisors: set[str], meter: RunCgroup | None = None) -> None:
        self.limit = cpu_limit_s(limits)
        self.cpus = max(1, min(cpus, int(limits["processes"] or cpus)))
        self.supervisors = supervisors
        self.meter = meter if meter is not None and meter.cpu_s() >= 0 else None  # a count that can be read
        self.zero = self.meter.used_s(supervisors) if self.meter is not None else 0.0
        self.due = time.monotonic() + self.limit / self.cpus
        self.over = False

    def used(self) -> tuple[float, int]:
        """The run's CPU time so far, and how many CPUs it may be using at once."""
        if self.meter is not None:
            return self.meter.used_s(self.supervisors) - self.zero, self.cpus
        return living_cpu_s(self.supervisors)

    def used_at_end(self, summed: float) -> float:
        """The run's CPU time once its processes are gone: the kernel's count, or without one ``summed``."""
        if self.meter is None or self.meter.cpu_s() < 0:  # none, or gone: the sum is all there is
            return summed
        return max(0.0, self.used()[0])

    def check(self) -> bool:
        """Read the run's CPU time; whether it is past the limit (the caller then kills the run)."""
        used, threads = self.used()
        if used > self.limit:
            self.over = True
            return True
        rate = max(1, min(self.cpus, threads))
        self.due = time.monotonic() + max((self.limit - used) / rate, MIN_CHECK_S)
        return False

    def over_at_end(self, cpu_s: float) -> bool:
        """Whether the run's whole tree, which used ``cpu_s`` in all, went past the limit."""
        self.over = self.over or cpu_s > self.limit
        return self.over


def runs_used_s(meter: RunCgroup | None, box: int) -> float | None:
    """The CPU time of a worker's runs so far by the kernel's count, as the agent reads it (less its own and
    the box's, in a container's own cgroup); None without a count."""
    return meter.used_s({str(os.getpid()), str(box)}) if meter is not None else None


def machine_clock() -> tuple[float, float]:
    """Seconds since boot, and seconds every CPU of the machine spent idle since then, added up (the
    kernel's ``/proc/uptime``: one short read, so every run can take one as it starts)."""
    try:
        fd = os.open("/proc/uptime", os.O_RDONLY)
        try:
            up, idle = os.read(fd, 128).split()[:2]
        finally:
            os.close(fd)
        return float(up), float(idle)
    except (OSError, ValueError):
        return 0.0, -1.0


def waited_for_others(
    box: int, started_ticks: float, plain: bool, since: tuple[float, float], used_s: float | None = None
) -> float:
    """How long a run's processes waited for a CPU that processes outside the run held, since ``since`` (the
    machine's clock as the run began, see :func:`machine_clock`).

    The wait is the longest ``run_delay`` (``/proc/PID/schedstat``: time runnable but not running) of the
    run's processes: those under the box that started at ``started_ticks`` (clock ticks since boot) or later,
    and in a run of its own (``plain``) the process the box forked ahead for it (it slept until the run
    began, and sleeping adds no delay). A series' process and its checker live across runs: their waits
    are older, and do not count. A run can make its processes wait by itself (a busy child of its own, at any
    priority, waits while the others run): that is no other run's doing. So a process's wait counts less the
    CPU time of the run's other processes (which is at least what they made it wait), and only as far as the
    machine's CPUs were busy with processes that are not the run's while it ran: their time in all, less that
    of the run's processes, which they cannot inflate. The run's processes' time is ``used_s``, the kernel's
    count (see ``run_cgroup.py``), where there is one: a sum over the processes there are leaves out those
    that are gone unwaited, whose time would then buy their siblings' waits.
    """
    used_ticks = 0.0
    seen: list[tuple[float, int]] = []  # each process's wait, and its own CPU time (in ticks)
    stack = [(box, 0)]
    while stack:
        pid, depth = stack.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
                stack.extend((int(c), depth + 1) for c in f.read().split())
            if depth == 0:
                continue  # the box
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[19]) >= started_ticks or (plain and depth == 1):  # field 22: start time, in ticks
                used_ticks += sum(int(n) for n in fields[11:15])  # utime, stime, cutime, cstime
                # The wait is its main thread's: its own time is that thread's too (its other threads' is not).
                with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
                    own = sum(int(n) for n in f.read().rsplit(b")", 1)[1].split()[11:13])
                with open(f"/proc/{pid}/schedstat", "rb") as f:
                    seen.append((int(f.read().split()[1]) / 1e9, own))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    if used_s is not None:
        used_ticks = max(used_ticks, used_s * _CLOCK_TICKS)
    waited = max((wait - (used_ticks - own) / _CLOCK_TICKS for wait, own in seen), default=0.0)
    up, idle = machine_clock()
    if idle < 0 or since[1] < 0:
        return max(0.0, waited)  # no machine clock to bound it by
    busy = (up - since[0]) * os.sysconf("SC_NPROCESSORS_ONLN") - (idle - since[1])
    return max(0.0, min(waited, busy - used_ticks / _CLOCK_TICKS))


def task_times(pid: int) -> tuple[float, float] | None:
    """A process's main thread: the seconds it waited runnable for a CPU (``schedstat``'s ``run_delay``) and the
    CPU seconds it ran (its ``sum_exec_runtime``, to the nanosecond as the cgroups count), so far; None where it
    is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat", "rb") as f:
            ran, delay = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    return int(delay) / 1e9, int(ran) / 1e9


def waited_since(pid: int, zero: tuple[float, float] | None, since: tuple[float, float], used_s: float | None) -> float:
    """How long process ``pid`` (a session's kernel, which lives across its cells) waited for a CPU that
    processes outside its session held, since ``zero`` (its :func:`task_times` then) and ``since`` (the
    machine's clock then): what :func:`waited_for_others` is for a run, for a process older than the wait.

    Its wait counts less the CPU time of the session's other processes over that time (``used_s``, the kernel's
    count of all of them, less the kernel's own), which it may have made wait itself, and only as far as the
    machine's CPUs were busy with other processes than the session's."""
    now = task_times(pid)
    if zero is None or now is None:
        return 0.0
    delay, ran = now[0] - zero[0], now[1] - zero[1]
    used = max(used_s if used_s is not None else ran, ran)
    waited = delay - (used - ran)
    up, idle = machine_clock()
    if idle < 0 or since[1] < 0:
        return max(0.0, waited)
    busy = (up - since[0]) * os.sysconf("SC_NPROCESSORS_ONLN") - (idle - since[1])
    return max(0.0, min(waited, busy - used))


def task_state(pid: int) -> tuple[str, float] | None:
    """A process's main thread: its state (``R``: running or waiting for a CPU) and the CPU seconds it ran (as
    :func:`task_times`)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        with open(f"/proc/{pid}/task/{pid}/schedstat", "rb") as f:
            ran = int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None
    return state, ran
