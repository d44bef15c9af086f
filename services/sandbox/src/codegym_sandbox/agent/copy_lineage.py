"""What a session's kernel is copied with (``session_family.py``): the host users its copies may be given, the
mounts of its files, and where its copies' cgroups are made, on the local backend and in a container."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import host_users, isolation, ptrace_calls
from .copy_files import Mounts
from .memory_cgroup import MemoryCgroup
from .pids_cgroup import PidsCgroup
from .run_cgroup import RunCgroup
from .scratch_cost import tmpfs_options

if TYPE_CHECKING:
    from .box_handle import BoxHandle

# The least limit of a continuation's cgroup made beside its session's (kept_memory): room for its next cell to
# start, and end for memory.
_LEAST_BYTES = 16 << 20


@dataclass(frozen=True)
class Ids:
    """Who a lineage's kernels are in their own namespaces, and how the server's names of users (``FORK_BASE``
    plus a sessions' slot's place) are found among the ids of the worker's namespace."""

    program: int  # the kernel's uid in its namespace: PROGRAM_UID, or a container's programs' uid
    program_gid: int
    first: int  # the first sessions' slot's user (``host_users.first_fork_id``)
    gid_shift: int  # a user's gid less its uid

    def of(self, user: int) -> int:
        return self.first + user - host_users.FORK_BASE


class Lineage:
    """What a kernel's copies are made with: the ids its namespace maps (``host_users.fork_pool``), the mounts
    of its files, and the cgroups its copies' own are made beside."""

    def __init__(
        self,
        pool: list[int],
        mounts: Mounts,
        memory: MemoryCgroup | None,
        meter: RunCgroup | None,
        ids: Ids,
        pids: PidsCgroup | None = None,
        worker: bool = False,
    ) -> None:
        self.pool, self.mounts, self.memory, self.meter, self.ids = pool, mounts, memory, meter, ids
        self.pids = pids  # in a container: its copies' counts of processes are made beside it
        self.worker = worker  # its memory cgroup is the worker's (the box is in it too), not a member's own

    @classmethod
    def of_worker(cls, bx: BoxHandle) -> Lineage:
        config = bx.config
        first = host_users.first_fork_id(config) or 0
        if not config.get("namespaces", True):
            # A container: its programs are host users (no namespace of the worker's own), its scratch space and
            # /dev/shm its engine's, and the cgroups of its copies made where the server bound them.
            uid, gid = config["program_uid"], config.get("program_gid", config["program_uid"])
            scratch, shm = (os.statvfs(p) for p in (isolation.SCRATCH, isolation.SHM))
            mounts = Mounts(
                isolation.SCRATCH,
                f"mode=0755,{tmpfs_options(scratch.f_blocks * scratch.f_frsize)}",
                isolation.SHM,
                f"mode=1777,{tmpfs_options(shm.f_blocks * shm.f_frsize)}",
                "",  # its /dev/pts is the container's, empty and read-only: nothing to make again
                (uid, gid),
            )
            paths = config.get("copies", [])
            memory = MemoryCgroup.beside(paths[0]) if len(paths) == 3 else None
            meter = RunCgroup.beside(paths[1], memory) if memory is not None else None
            pids = PidsCgroup.beside(paths[2], config.get("copy_processes", 0)) if memory is not None else None
            ids = Ids(uid, gid, first, host_users.container_gid_shift(config))
            if memory is None or pids is None:
                return cls([], mounts, None, None, ids)
            return cls(host_users.fork_pool(config), mounts, memory, meter, ids, pids, worker=True)
        size = config.get("tmp_bytes", 64 << 20)
        mounts = Mounts(
            isolation.SCRATCH,
            f"mode=0755,{tmpfs_options(size)}",
            isolation.SHM,
            f"mode=1777,{tmpfs_options(min(size, isolation.SHM_BYTES))}",
            f"newinstance,ptmxmode=0666,mode=0620,max={isolation.PTYS}",
        )
        ids = Ids(host_users.PROGRAM_UID, host_users.PROGRAM_UID, first, 0)
        memory, meter = config.get("memory_cgroup"), config.get("run_cgroup")
        return cls(host_users.fork_pool(config), mounts, memory, meter, ids, worker=True)


def kept_memory(lineage: Lineage, limit: int) -> MemoryCgroup | None:
    """The memory cgroup of the copy that continues the session (its limit ``limit``).

    What the session held as it was copied stays charged where it was (a charge never moves with its process),
    shared with its copies until the last of them lets it go; the continuation must be bounded with it, under the
    session's one limit, or the session could hold it and as much again. A member's own cgroup holds its kernel
    alone (killed once copied): the continuation stays in it. The worker's holds its box too: the continuation
    goes in a cgroup inside it (cgroup v1), whose limit bounds both; where none can be made inside (cgroup v2's
    holds a process, a container's is its engine's), in one beside it, whose limit is the room the worker's would
    leave at the session's limit and the supervisors' share (as a worker's own cgroup's limit is: see
    ``MemoryCgroup.apply``), the session's limit at most: what is charged there only shrinks from then on (the
    kernel that held it is gone, its pages freed as its copies let them go), but for the supervisors' own.
    """
    own = lineage.memory
    assert own is not None
    if not lineage.worker:
        return own
    if (nested := own.nested(limit)) is not None:
        return nested
    memory = own.sibling()
    if memory is not None:
        holder = own if own.fd >= 0 else MemoryCgroup.own()  # a container's own, whose limit is its engine's
        held = holder.usage() if holder is not None else 0
        for fd in holder.descriptors() if holder is not None and holder is not own else ():
            os.close(fd)  # read for this alone
        room = limit + MemoryCgroup.SUPERVISORS_BYTES - held
        memory.hold_to(max(min(limit, room), _LEAST_BYTES))
    return memory


def refusal(lineage: Lineage) -> str | None:
    """Why no kernel of this worker can be copied, or None."""
    if not ptrace_calls.SUPPORTED:
        return "forking a session needs an x86_64 machine"
    if not lineage.pool or lineage.memory is None:
        return (
            "forking a session needs each copy's programs to be a host user of their own, in a memory cgroup of "
            "their own: a server run as root (and, on a container backend, the cgroups it binds for copies)"
        )
    if lineage.mounts.contained is not None and not _proc_hides_others():
        # Its copies are users of their own, each of whom must see no sibling's processes (their command lines,
        # their CPU times: a channel between the members of a group).
        return "forking a session in a container needs its /proc to hide each user's processes from the others"
    return None


@functools.cache
def _proc_hides_others() -> bool:
    """Whether this process's /proc shows each user's processes to that user alone (``hidepid=invisible``): the
    options of the last mount at /proc, the one on top. Read once: the agent's mounts do not change after its
    start, and every fork asks."""
    options: list[str] = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and fields[4] == "/proc":
                    options = fields[-1].split(",")
    except OSError:
        pass
    return "hidepid=invisible" in options or "hidepid=2" in options
