"""A session's processes stopped between its cells, so that an idle session holds memory and never a CPU.

A cell may leave processes running after it ends (a child it started, a thread of the kernel): were they let
run between cells, a session could compute at any time, outside the time limit of any cell, beside the runs
and cells the CPUs are shared among. So once a cell's record is read, the agent stops every process under the
session's box, and the box (``SIGSTOP``, which no process can catch or ignore), and continues them
(``SIGCONT``) as the next cell is sent. Every process of the session is under the box: the box is the init of
its pid namespace, so an orphan comes back to it. A process may fork while the others are being stopped: the
walk goes on until it finds no process that is not stopped. Among them the kernel is the box's oldest child
(:func:`oldest_child`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from . import stopped_threads
from .stopped_threads import descendants as descendants  # the processes under a box, for its callers

_ROUNDS = 20  # quick walks of the tree at least (half a millisecond apart)
# And for this long at least: on a loaded machine a process may not run to take its stop within the quick walks,
# and a session whose processes were not seen stopped ends at its next cell. Past the quick walks, each waits at
# least as long as the last took: 200 walks at least, over 255 processes that could not stop, cost the agent 1.7
# CPU-seconds a pause, charged to no run (round 56).
_STOP_S = 1.0
# Past this many rounds a process still running has each of its running threads sent a stop of its own: the
# stop sent to a process goes to one thread, which may not take it (``stopped_threads.py``).
_THREAD_ROUNDS = 2
# Why a session ends at its next cell where :func:`stop` returned False: the one process that waits through any
# stop is a vfork's parent, blocked in the kernel until its child execs or ends.
UNSTOPPED = "its processes could not all be stopped after its last cell (one waited in the kernel: a vfork's parent)"


Listed = Callable[[], set[int]]


def _members(root: int, listed: Listed | None = None) -> list[str]:
    """The ``/proc`` directory of every process of the session: those ``listed`` (a copy of a session's kernel:
    every process in its cgroup, wherever its parent ends), else those of the box's own ``/proc`` (the box is the
    init of the session's pid namespace, and its ``/proc`` lists by pid every process in it, however they move
    between parents), or where the box has none, those of ``root`` and its descendants."""
    proc = f"/proc/{root}/root/proc"
    if listed is not None:
        return [f"/proc/{pid}" for pid in listed()]
    try:
        # Only the /proc of the box's own pid namespace, the box its init: never the agent's (the whole machine's).
        ns = os.readlink(f"/proc/{root}/ns/pid")
        if ns != os.readlink("/proc/self/ns/pid") and os.readlink(f"{proc}/1/ns/pid") == ns:
            return [f"{proc}/{name}" for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        pass
    return [f"/proc/{pid}" for pid in (root, *descendants(root))]


def _signal(proc: str, sig: int) -> None:
    """Send ``sig`` to the process at ``proc`` (a ``/proc`` directory, perhaps of another pid namespace)."""
    try:
        fd = os.open(proc, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # gone
    try:
        signal.pidfd_send_signal(fd, sig)  # a /proc directory names its process, in any pid namespace
    except OSError:
        pass  # gone, or a zombie
    finally:
        os.close(fd)


def _stopped(proc: str, known: dict[str, bool]) -> bool:
    return stopped_threads.stopped(proc, known)


def _stop_threads(root: int, running: list[str]) -> None:
    """A stop to each running thread of the processes at ``running`` (``/proc`` directories: the box's own, whose
    pids are of its namespace, or the agent's)."""
    inner = f"/proc/{root}/root/proc/"
    ns, hosts = "", dict[int, int]()  # the box's pid namespace and its pids' in the agent's: read where needed
    for proc in running:
        name = os.path.basename(proc)
        if not name.isdigit():
            continue
        pid = int(name)
        if not proc.startswith(inner):
            stopped_threads.stop_threads(pid)  # one of the agent's own pids (a box it may not read: a run's)
            continue
        if not ns:
            try:
                ns = os.readlink(f"/proc/{root}/ns/pid")
            except OSError:
                return  # the box is gone
            hosts = stopped_threads.host_pids(root)
        if pid in hosts:
            stopped_threads.stop_threads(hosts[pid], ns)


def stop(root: int, listed: Listed | None = None) -> bool:
    """Stop every process of the session, and ``root`` (the box: it watches the session's memory, which
    stopped processes do not change, and sampling it for every idle session would cost the CPUs that idle
    sessions must leave alone); False where some could not be seen stopped in time.

    Seen stopped twice running, with the same processes: a process that ends meanwhile continues others
    (its children's ``PR_SET_PDEATHSIG``, an orphaned process group's ``SIGCONT``), possibly after they were
    read stopped, and reads ``Z`` only once it has; it reads running until then, so once two rounds in a row
    find every process stopped or ended, none can wake another."""
    calm, seen, rounds = 0, None, 0
    deadline = time.monotonic() + _STOP_S
    while rounds < _ROUNDS or time.monotonic() < deadline:
        rounds += 1
        began = time.monotonic()
        members = sorted(_members(root, listed))
        known: dict[str, bool] = {}  # each process read once a round, a chain of vforks too
        running = [proc for proc in members if not _stopped(proc, known)]
        if not running:
            calm = calm + 1 if members == seen else 1
            if calm >= 2:
                return True
        else:
            calm = 0
            for proc in running:
                _signal(proc, signal.SIGSTOP)
            if rounds > _THREAD_ROUNDS:
                _stop_threads(root, running)
            # The stop is delivered as each process next runs; past the quick rounds, one that has not run yet is
            # waited for with the CPUs left to it, the walk taking half of a CPU at most.
            time.sleep(0.0005 if rounds < _ROUNDS else max(0.01, time.monotonic() - began))
        seen = members
    return False


def resume(root: int, listed: Listed | None = None) -> None:
    """Continue ``root`` (first: it watches the others' memory) and every process of the session."""
    for proc in sorted(_members(root, listed), key=lambda p: p != f"/proc/{root}/root/proc/1"):
        _signal(proc, signal.SIGCONT)


def oldest_child(pid: int) -> int:
    """The oldest living child of ``pid`` (a session's box: its kernel; what a cell leaves behind comes to the box
    later); 0 where it has none."""
    by_age = sorted((_started(child), child) for child in _children(pid))
    return by_age[0][1] if by_age else 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def _started(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s field 22); the latest there is
    where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 1 << 62
