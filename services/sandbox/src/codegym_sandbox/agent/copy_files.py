"""A fork's copies' files and ids (``kernel_copy.py``): each copy's user namespace's id maps, and in its mount
namespace new tmpfs mounts for its scratch directory and ``/dev/shm`` holding a copy of its parent's files, owned
by its user, and a devpts instance of its own. Made by a helper process, so that the agent's own namespaces and
ids stay as they are. In a container the copies mount their own tmpfs, told by the agent (``copy_making.py``)
between the helper's maps and its files: see :func:`_contained`."""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import acting_ids, linux
from .copy_tree import MAX_FILES, FileIds, TooMany, copy_tree
from .ptrace_calls import TraceFailed

if TYPE_CHECKING:
    from .memory_cgroup import MemoryCgroup
    from .pids_cgroup import PidsCgroup
    from .ptrace_calls import Tracee
    from .run_cgroup import RunCgroup


@dataclass
class Target:
    """One copy to make: its id maps (lines of ``uid_map`` in the agent's namespace's ids), the uid and gid its
    programs have inside, and the cgroups it is put in."""

    uid_map: str
    gid_map: str
    uid: int
    gid: int
    owner: tuple[int, int]  # the copy's programs' uid and gid (its files' owner), as the agent sees them
    memory: MemoryCgroup | None
    meter: RunCgroup | None
    # The session's own continuation: it keeps its files, descriptors and mappings, which it shares with nothing
    # but the kernel it continues (killed once copied); every other copy gets its own.
    keeps: bool = False
    pids: PidsCgroup | None = None  # in a container: its count of processes (pids_cgroup.py)


@dataclass
class Mounts:
    """Where a kernel's files are, and how the copies' own mounts are made."""

    scratch: str
    scratch_options: str  # tmpfs options, less the owner (each copy's own)
    shm: str
    shm_options: str
    devpts_options: str  # empty: the kernel's /dev/pts is no devpts (a container's, read-only), kept as it is
    # In a container: the uid and gid of the session's programs, who made its kernel's namespaces (the agent,
    # root there, has no CAP_SYS_ADMIN to act in them: see :func:`_contained`). None on the local backend.
    contained: tuple[int, int] | None = None


def start(made: list[tuple[Tracee, Target]], kernel: int, mounts: Mounts) -> Helper:
    """Start making each copy's id maps, and in its mount namespace new tmpfs mounts for its scratch directory
    and ``/dev/shm`` holding a copy of the kernel's (owned by the copy's user), and a devpts instance of its own.
    Done by a helper process, in the kernel's user namespace (where the copies' namespaces begin, and where a
    map's ids are read), entering each copy's mount namespace in turn: the agent's own stay as they are, and it
    goes on with the copies meanwhile (:meth:`Helper.wait`)."""
    # Every process's /proc entry opened first: once in a copy's mount namespace, /proc is its box's (another
    # pid namespace's numbers).
    procs = [os.open(f"/proc/{child.pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for child, _ in made]
    # The files each copy is given are its memory: written from its own memory cgroup (joined by a descriptor
    # opened here, before the helper's ids change).
    joins = [target.memory.procs() if target.memory is not None else -1 for _, target in made]
    user = os.open(f"/proc/{kernel}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    source = os.open(f"/proc/{kernel}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    # In a container: the helper's word that the maps are written, and the agent's that the copies' mounts are made.
    steps = (os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)) if mounts.contained is not None else None
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # a descriptor per directory level
            if steps is not None:
                (agents, maps_made), (mounted, agents_word) = steps
                # The agent's ends closed here: its end (or its word) must reach this process as its pipe's end.
                os.close(agents)
                os.close(agents_word)
                _contained(procs, joins, made, mounts, (user, source), (maps_made, mounted))
            else:
                _made_inside(procs, joins, made, mounts, kernel, user)
            code = 0
        except TooMany:
            code = 3
        finally:
            os._exit(code)
    for fd in (*procs, *joins, user, source):
        if fd >= 0:
            os.close(fd)
    if steps is None:
        return Helper(helper, mounts)
    (maps_made, theirs), (ours, mounted) = steps
    os.close(theirs)
    os.close(ours)
    return Helper(helper, mounts, (maps_made, mounted))


def _made_inside(
    procs: list[int], joins: list[int], made: list[tuple[Tracee, Target]], mounts: Mounts, kernel: int, user: int
) -> None:
    """Each copy's maps, mounts and files, made from the agent's namespace (root there, with every capability in
    the copies' own), entering each copy's mount namespace in turn."""
    if os.readlink(f"/proc/{kernel}/ns/user") != os.readlink("/proc/self/ns/user"):
        # A copy's copy: its maps are read in its parent's namespace, where the agent's root has no id: the
        # files it makes are the kernel's user's (a file system of that namespace takes no unmapped owner).
        linux.setns(user, linux.CLONE_NEWUSER)
        linux.set_file_ids(made[0][1].uid, made[0][1].gid)
    for proc, join, (_, target) in zip(procs, joins, made, strict=True):
        _write_maps(proc, target)
        if target.keeps:
            continue
        ns = os.open("ns/mnt", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
        linux.setns(ns, linux.CLONE_NEWNS)
        os.close(ns)
        if join >= 0:
            os.write(join, b"0")
        (uid, gid), count = target.owner, [0]
        for point, options in ((mounts.scratch, mounts.scratch_options), (mounts.shm, mounts.shm_options)):
            old = os.open(point, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            owned = f"{options},uid={uid},gid={gid}" if point == mounts.scratch else options
            linux.mount("tmpfs", point, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, owned)
            new = os.open(point, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            copy_tree(old, new, target.owner, count, FileIds())
        if mounts.devpts_options:
            linux.mount("devpts", "/dev/pts", "devpts", linux.MS_NOSUID | linux.MS_NOEXEC, mounts.devpts_options)


def _write_maps(proc: int, target: Target) -> None:
    for name, lines in (("setgroups", "deny"), ("uid_map", target.uid_map), ("gid_map", target.gid_map)):
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=proc)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)


def _contained(
    procs: list[int],
    joins: list[int],
    made: list[tuple[Tracee, Target]],
    mounts: Mounts,
    kernel: tuple[int, int],
    steps: tuple[int, int],
) -> None:
    """:func:`_made_inside` in a container, whose root has no ``CAP_SYS_ADMIN``. The maps are written by a process
    of the programs' user, who made the first copies' user namespaces and so holds every capability in them and
    in theirs (:func:`acting_ids.act_as`), from the kernel's own namespace. The mounts are each copy's own, made by
    the copy as the agent has it (``copy_making.py``), with the capabilities its namespace gave it, once its maps
    are there (``steps``: this process says so on the first, and waits on the second for the mounts): a process
    that joined a copy's namespaces to mount them could not leave them, and one made for each copy cost more than
    the rest of its making. That user's files in a copy's namespace are no one's, where none can be made: so the
    files are copied from here, read as the kernel's user and written as the copy's, into the copy's mounts as
    its root shows them."""
    user, source = kernel
    maps_made, mounted = steps
    assert mounts.contained is not None
    status = os.open("status", os.O_RDONLY | os.O_CLOEXEC, dir_fd=source)
    try:
        lines = dict(line.split(":", 1) for line in os.read(status, 1 << 16).decode().splitlines() if ":" in line)
    finally:
        os.close(status)
    reading = (int(lines["Uid"].split()[1]), int(lines["Gid"].split()[1]))  # the kernel's, as this process sees them
    contained = mounts.contained

    def maps() -> None:
        acting_ids.act_as(*contained, (linux.CAP_SETUID, linux.CAP_SETGID))
        if os.readlink(f"/proc/self/fd/{user}") != os.readlink("/proc/self/ns/user"):
            linux.setns(user, linux.CLONE_NEWUSER)  # a copy's copy: from its kernel's namespace
        for proc, (_, target) in zip(procs, made, strict=True):
            _write_maps(proc, target)

    acting_ids.in_child(maps, "the copies' id maps could not be made")
    os.write(maps_made, b"1")
    if os.read(mounted, 1) != b"1":
        raise OSError("the copies' mounts were not made")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for proc, join, (_, target) in zip(procs, joins, made, strict=True):
        if target.keeps:
            continue
        if join >= 0:
            os.write(join, b"0")
        ids, count = FileIds(reading, target.owner), [0]
        for point in (mounts.scratch, mounts.shm):
            ids.read()
            old = os.open(f"root{point}", flags, dir_fd=source)
            ids.write()
            new = os.open(f"root{point}", flags, dir_fd=proc)
            if os.fstat(new).st_dev == os.fstat(old).st_dev:  # the kernel's own files: never written for a copy
                raise OSError(f"a copy has no mount of its own at {point}: its files are not written")
            copy_tree(old, new, target.owner, count, ids)


def own_mounts(target: Target, mounts: Mounts) -> list[tuple[str, str]]:
    """In a container, the tmpfs mounts a copy makes itself, in its namespaces (a mount point, its options): its
    scratch directory and ``/dev/shm``, both the copy's user's (a container's /dev/shm is root's, whom the copy's
    namespace does not map: its times and mode could not be set as the session's)."""
    points = ((mounts.scratch, mounts.scratch_options), (mounts.shm, mounts.shm_options))
    return [(point, f"{options},uid={target.uid},gid={target.gid}") for point, options in points]


class Helper:
    """The process making the copies' files (:func:`start`); in a container, the copies mount their own
    (``steps``: the helper's word that their maps are there, :meth:`maps_made`, and the agent's that the mounts
    are made, :meth:`mounted`)."""

    def __init__(self, pid: int, mounts: Mounts, steps: tuple[int, int] | None = None) -> None:
        self.pid, self.mounts, self.steps = pid, mounts, steps

    @property
    def copies_mount(self) -> bool:
        return self.steps is not None

    def maps_made(self) -> None:
        """Once the copies' id maps are written (what the helper could not do is raised)."""
        assert self.steps is not None
        if os.read(self.steps[0], 1) != b"1":
            self.wait()
            raise TraceFailed(0, "the copies' id maps could not be made")

    def mounted(self) -> None:
        """Tell the helper that every copy's mounts are made: it copies the files into them."""
        assert self.steps is not None
        os.write(self.steps[1], b"1")

    def wait(self) -> None:
        """Once it is done: what it could not do is raised."""
        self._close_steps()
        if not self.pid:
            return
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        code = os.waitstatus_to_exitcode(status)
        if code == 3:
            raise TooMany(f"the session holds more than {MAX_FILES} files and directories: too many to copy")
        if code != 0:
            raise TraceFailed(0, "the copies' namespaces could not be made")

    def _close_steps(self) -> None:
        if self.steps is not None:
            for fd in self.steps:
                os.close(fd)
            self.steps = None

    def stop(self) -> None:
        """End it where it still runs (the fork is refused), and take its end."""
        self._close_steps()
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            self.pid = 0
