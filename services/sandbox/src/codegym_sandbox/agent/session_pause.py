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

from . import vfork_wait

_ROUNDS = 200  # walks of the tree at least: a session's processes are bounded (SESSIONS__PROCESSES)
# And for this long at least: on a loaded machine a process may not run to take its stop within 200 walks (a
# tenth of a second), and a session whose processes were not seen stopped ends at its next cell.
_STOP_S = 1.0
# Why a session ends at its next cell where :func:`stop` returned False: the one process that waits through any
# stop is a vfork's parent, blocked in the kernel until its child execs or ends.
UNSTOPPED = "its processes could not all be stopped after its last cell (one waited in the kernel: a vfork's parent)"


def descendants(root: int) -> set[int]:
    """Every process under ``root`` (not ``root`` itself), by the kernel's lists of children."""
    found: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    children = [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in found:
                    found.add(child)
                    stack.append(child)
    return found


def _state(path: str) -> str:
    try:
        with open(f"{path}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"  # gone


def _stopped(proc: str) -> bool:
    """Whether every thread of the process at ``proc`` (its ``/proc`` directory) is stopped (or gone). Its
    leader's state is not the process's: a leader that exited alone reads ``Z`` while its other threads run on."""
    try:
        tasks = os.listdir(f"{proc}/task")
    except OSError:
        return True  # gone
    return all(_state(f"{proc}/task/{task}") in ("T", "t", "Z", "X") or _waits(f"{proc}/task/{task}") for task in tasks)


def _waits(task: str) -> bool:
    """Whether the thread at ``task`` waits in ``vfork`` for a child that stands stopped: it cannot take a stop, and
    runs nothing until its child is continued (``vfork_wait.py``); the stop holds it as well as its own would."""
    child = vfork_wait.vfork_child(task)
    return child is not None and _stopped(child)


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
        members = sorted(_members(root, listed))
        running = [proc for proc in members if not _stopped(proc)]
        if not running:
            calm = calm + 1 if members == seen else 1
            if calm >= 2:
                return True
        else:
            calm = 0
            for proc in running:
                _signal(proc, signal.SIGSTOP)
            # The stop is delivered as each process next runs; past the quick rounds, one that has not run yet is
            # waited for with the CPUs left to it (a process that never stops cost the agent a fifth of a second).
            time.sleep(0.0005 if rounds < _ROUNDS else 0.01)
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
