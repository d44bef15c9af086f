"""Who a worker's programs are on the host, and what they may take of the kernel's counts per user.

The kernel counts some things per user of the host, whatever namespace a process is in: pipe pages
(``fs.pipe-user-pages-soft``: past it every new pipe of the user gets two pages), epoll watches
(``fs.epoll.max_user_watches``), and, in a container without a user namespace, queued signals and processes.
Were every worker's programs one user, a run that took its user's whole count would leave none to the runs on
every other worker. So each worker's programs are a host user of their own, from a range that begins at the
``host_uid`` setting (local backend, as root) or at the uid of ``container_user`` (containers, see
``backends/program_users.py``): the first plus the worker's slot, and no two live workers share a slot. What one
run may take of a count that has a per-process limit is bounded too (:func:`bound_user_counts`), so that all
workers together stay within the host's.

Without root, the local backend's programs run as the server's own uid, which every worker (and the server)
then shares.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

from . import linux
from .protocol import WorkerConfig

# A program runs as this uid inside a worker's user namespace; it maps to the worker's host uid.
PROGRAM_UID = 1000
# In a session's worker, the ids by which the host users of the other sessions' slots are known there, each
# FORK_BASE plus the slot's place among the sessions': what a copy of its kernel may be given (kernel_copy.py).
FORK_BASE = 10000


def host_ids(first: int | None, slot: int) -> int | None:
    """The host uid (and gid) of the programs of worker ``slot``, in the range that begins at ``first``."""
    return None if first is None else first + slot


def fork_pool(config: WorkerConfig) -> list[int]:
    """The ids (in the worker's namespace) a session's copies may be given: each session slot's but the worker's
    own; none for a worker of runs, or one whose programs have no host user of their own. In a container (no
    namespace of the worker's own) they are the host's uids of those slots' programs, as its own programs' are."""
    first, count = config.get("session_slots", (0, 0))
    slot = config.get("slot", 0)
    if os.geteuid() != 0 or not first <= slot < first + count:
        return []
    base = first_fork_id(config)
    if base is None:
        return []
    return [base + j for j in range(count) if first + j != slot]


def first_fork_id(config: WorkerConfig) -> int | None:
    """The id of the first session slot's programs in the worker's namespace (the server names a copy's user
    :data:`FORK_BASE` plus its slot's place among the sessions'), or None where copies have no host user of their
    own: without root, or in a container whose cgroups for copies the server did not bind."""
    if config.get("namespaces", True):
        return FORK_BASE if config.get("host_uid") is not None else None
    run_as = config.get("run_as")
    if not run_as or not config.get("copies"):
        return None
    return int(run_as.partition(":")[0]) + config.get("session_slots", (0, 0))[0]


def container_gid_shift(config: WorkerConfig) -> int:
    """What a program's gid is more than its uid in a container (``run_as``'s gid less its uid); 0 elsewhere."""
    run_as = config.get("run_as")
    if config.get("namespaces", True) or not run_as:
        return 0
    user, _, group = run_as.partition(":")
    return int(group or user) - int(user)


def pool_lines(pool: list[int], outside: Callable[[int], int]) -> str:
    """``uid_map`` lines mapping each id of ``pool`` to ``outside(id)``, in runs of consecutive ids."""
    lines, ids = [], sorted(pool)
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1 or outside(ids[i]) != outside(ids[i - 1]) + 1:
            lines.append(f"{ids[start]} {outside(ids[start])} {i - start}\n")
            start = i
    return "".join(lines)


def id_runs(pool: list[int]) -> list[tuple[int, int]]:
    """The runs of consecutive ids of ``pool``: each its first id and the id past its last."""
    runs, ids = [], sorted(set(pool))
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            runs.append((ids[start], ids[i - 1] + 1))
            start = i
    return runs


def lines_less(runs: list[tuple[int, int]], less: int, shift: int = 0) -> str:
    """:func:`pool_lines` of a pool (its :func:`id_runs`) less the id ``less``, each id plus ``shift`` mapped to
    itself: the pool's runs, the one that holds ``less`` cut in two. Each of a fork's copies maps the pool less
    its own user: from the runs, found once, not a step per id of the pool for each copy (a fork into 16 took a
    millisecond or more over them)."""
    lines = []
    for first, end in runs:
        for a, b in ((first, less), (less + 1, end)) if first <= less < end else ((first, end),):
            if b > a:
                lines.append(f"{a + shift} {a + shift} {b - a}\n")
    return "".join(lines)


def bound_user_counts(config: WorkerConfig) -> None:
    """Bound what this worker's programs may take of the kernel's counts per user that have a per-process limit.

    Queued signals (``RLIMIT_SIGPENDING``: real-time signals, POSIX timers) are counted per user in each user
    namespace and again for the user that made the namespace, the server's, against the server's own limit
    (recorded when the namespace is made: so this is set after). So that all workers together stay within it,
    each gets ``queued_signals`` (see ``choose.queued_signals``). Set on the agent, so that the box and every
    process of every run inherit it; no program can raise it again.
    """
    signals = config.get("queued_signals")
    if signals:
        # Only ever lowered: where the agent was given less (a container's limit; gVisor's, which is 0 and refuses
        # even to be set to itself), what it has stays.
        hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]
        if hard == resource.RLIM_INFINITY or signals < hard:
            resource.setrlimit(resource.RLIMIT_SIGPENDING, (signals, signals))


def unshare_user(flags: int, privileged: bool, uid: int, gid: int, host_uid: int | None, pool: str = "") -> None:
    """Enter a new user namespace (and ``flags``' others): root there is ``uid``/``gid``; with ``privileged``,
    programs are :data:`PROGRAM_UID` there and ``host_uid`` outside, and ``pool`` (``uid_map`` lines) maps the
    ids of a session's copies too."""
    if not privileged or host_uid is None:
        linux.unshare(flags)
        linux.write_id_maps("self", f"0 {uid} 1\n", f"0 {gid} 1\n", deny_setgroups=True)
        return
    # Writing a map with more than our own id needs CAP_SETUID in the parent namespace, which we lose
    # by entering the new one: a helper that stays outside writes it for us.
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    parent = os.getpid()
    helper = os.fork()
    if helper == 0:
        code = 0
        try:
            os.close(ready_w)
            os.close(done_r)
            os.read(ready_r, 1)
            linux.write_id_maps(
                parent,
                f"0 {uid} 1\n{PROGRAM_UID} {host_uid} 1\n{pool}",
                f"0 {gid} 1\n{PROGRAM_UID} {host_uid} 1\n{pool}",
                deny_setgroups=False,
            )
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(ready_r)
    os.close(done_w)
    try:
        linux.unshare(flags)
    finally:
        os.write(ready_w, b"x")
        os.close(ready_w)
        os.close(done_r)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("could not write the user namespace's id maps")
