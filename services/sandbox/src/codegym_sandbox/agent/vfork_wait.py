"""A thread that waits in ``vfork`` for its child: the one wait a stop cannot interrupt, and the one memory that two
processes share whole.

``posix_spawn``, Python's ``subprocess``, Go's ``os/exec`` and the JDK start a program by ``vfork`` (or ``clone``
with ``CLONE_VM|CLONE_VFORK``): the child runs in its parent's address space, and the thread that made it waits,
uninterruptibly, until the child executes a program or ends. So where the child stands stopped, its parent waits and
cannot be stopped (it runs no instruction of its own meanwhile); and while it waits, the child's memory is its
parent's, which each would count whole. A ``clone`` that adds ``CLONE_THREAD`` makes no child process but a thread
of the same one (its children list leaves it out): no wait of this kind, and no memory another process counts.
"""

from __future__ import annotations

import os

from . import syscall_table

_TABLE = syscall_table.SYSCALLS.get(os.uname().machine, {})
_VFORK, _CLONE = str(_TABLE.get("vfork", "")), str(_TABLE.get("clone", ""))
_CLONE_VM, _CLONE_VFORK, _CLONE_THREAD = 0x100, 0x4000, 0x10000


def vfork_child(task: str, sharing: bool = True) -> str | None:
    """The ``/proc`` directory of the child process the thread at ``task`` (``/proc/PID/task/TID``) waits for in
    ``vfork``; None where it waits for none. Its newest child: the thread made none since, and ``CLONE_PARENT``
    (which would make it another's) is refused by the seccomp filter. ``sharing``: only a child that shares its
    memory (``CLONE_VM``); else any ``CLONE_VFORK``'s, which waits as uninterruptibly with a memory of its own
    (round 56: 120 such waits a run read running, and every stop walk of it ran to its end)."""
    try:
        with open(f"{task}/syscall") as f:
            fields = f.read().split()
        if len(fields) < 2 or fields[0] not in (_VFORK, _CLONE):
            return None
        if fields[0] == _CLONE:
            flags = int(fields[1], 16)
            wanted = _CLONE_VM | _CLONE_VFORK if sharing else _CLONE_VFORK
            if flags & (wanted | _CLONE_THREAD) != wanted:
                return None
        with open(f"{task}/children") as f:
            children = f.read().split()
    except (OSError, ValueError):
        return None
    proc = task.rsplit("/task/", 1)[0].rsplit("/", 1)[0]  # the /proc the pids are of
    newest: tuple[int, str] | None = None
    for child in children:
        try:
            with open(f"{proc}/{child}/stat", "rb") as f:
                started = int(f.read().rsplit(b")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            continue
        if newest is None or started >= newest[0]:
            newest = (started, f"{proc}/{child}")
    return newest[1] if newest is not None else None


def leader(proc: str) -> str:
    """The task directory of the leader of the process at ``proc`` (``/proc/PID``)."""
    return f"{proc}/task/{proc.rsplit('/', 1)[1]}"
