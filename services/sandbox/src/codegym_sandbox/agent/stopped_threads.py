"""Which processes of a stop walk (``session_pause.stop``) are stopped, and a stop sent to each thread of one that
will not take its process's.

A stop sent to a process goes to one of its threads (its leader, where that one can take it), which starts the
group stop: every thread stops as it next runs. A leader that waits in ``vfork`` for its child never takes it (the
wait is the kernel's), so the group stop never starts and the process's other threads compute on, however often
the stop is sent again (a second stop while one is pending is dropped): a session computed between its cells,
and a run paused for the memory budget grew on, with the pause credited (round 55). A stop sent to a thread that
runs starts the group stop, which holds the waiting leader as it comes back from its wait.

A thread that waits in ``vfork`` for a child that stands stopped is as stopped as a stop would hold it
(``vfork_wait.py``); a chain of such waits is read once a round (a program may make one as deep as its processes
allow: read once per process that waits, it was quadratic in its depth, and as a recursion it failed past
Python's stack, answering SE).
"""

from __future__ import annotations

import ctypes
import os
import signal

from . import vfork_wait

STOPPED_STATES = ("T", "t", "Z", "X")
_libc = ctypes.CDLL(None, use_errno=True)
_tgkill = getattr(_libc, "tgkill", None)  # glibc 2.30 on
# Whether /proc names processes as this process's own pid namespace does (tgkill takes its ids).
OWN_PROC = os.path.exists("/proc/self") and os.readlink("/proc/self") == str(os.getpid())


def state(path: str) -> str:
    """The state of the process or thread at ``path`` (a ``/proc`` directory); ``X`` where it is gone."""
    try:
        with open(f"{path}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"


def _waits_for(proc: str) -> list[str] | None:
    """The children the threads of the process at ``proc`` wait for in ``vfork``, where its other threads are
    stopped (or gone); None where one of them runs."""
    try:
        tasks = os.listdir(f"{proc}/task")
    except OSError:
        return []  # gone
    children = []
    for task in tasks:
        path = f"{proc}/task/{task}"
        if state(path) in STOPPED_STATES:
            continue
        child = vfork_wait.vfork_child(path, sharing=False)
        if child is None:
            return None
        children.append(child)
    return children


def stopped(proc: str, known: dict[str, bool]) -> bool:
    """Whether every thread of the process at ``proc`` is stopped (or gone), or waits in ``vfork`` for a child that
    is. ``known``: what this round of the walk read already, which it adds to (each process read once a round).
    Its leader's state is not the process's: a leader that exited alone reads ``Z`` while its other threads run."""
    on_way: set[str] = set()  # a wait that comes back to a process on the way is no wait the kernel makes: running
    stack: list[tuple[str, list[str] | None]] = [(proc, None)]
    while stack:
        at, children = stack.pop()
        if at in known:
            continue
        if children is None:
            if at in on_way:
                known[at] = False
                continue
            children = _waits_for(at)
            if children is None:
                known[at] = False
                continue
            on_way.add(at)
            stack.append((at, children))
            stack.extend((child, None) for child in children if child not in known)
        else:
            known[at] = all(known.get(child, False) for child in children)
    return known[proc]


def stop_threads(host: int, ns: str | None = None) -> None:
    """Send ``SIGSTOP`` to each thread of the process ``host`` (a pid of the agent's own namespace) that runs; where
    ``ns`` is given, only if the process is still of that pid namespace (not a pid the kernel gave anew)."""
    if _tgkill is None or not OWN_PROC:
        return
    try:
        if ns is not None and os.readlink(f"/proc/{host}/ns/pid") != ns:
            return
        tasks = os.listdir(f"/proc/{host}/task")
    except OSError:
        return
    for task in tasks:
        path = f"/proc/{host}/task/{task}"
        if state(path) not in STOPPED_STATES and vfork_wait.vfork_child(path, sharing=False) is None:
            _tgkill(host, int(task), signal.SIGSTOP)  # gone meanwhile: ESRCH, nothing sent


def host_pids(root: int) -> dict[int, int]:
    """The pid in the agent's namespace of each process of the pid namespace ``root`` is in (under its init: a
    session's kernel, or a box), by its pid in that namespace (its ``NSpid`` at ``root``'s depth). All of them: an
    orphan comes back to the init, not to ``root``."""
    depth = len(_ns_pids(root))
    if depth < 2:
        return {}
    init = root
    while _ns_pids(init)[depth - 1 : depth] != [1]:  # climb to the namespace's init
        init = _parent(init)
        if init <= 0 or len(_ns_pids(init)) != depth:
            return {}
    out: dict[int, int] = {}
    for pid in (init, *descendants(init)):
        ids = _ns_pids(pid)
        if len(ids) >= depth:
            out[ids[depth - 1]] = pid
    return out


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _ns_pids(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


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
