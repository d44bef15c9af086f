"""A fork's copies' files and ids (``kernel_copy.py``): each copy's user namespace's id maps, and in its mount
namespace new tmpfs mounts for its scratch directory and ``/dev/shm`` holding a copy of its parent's files, owned
by its user, and a devpts instance of its own. Made by a helper process, so that the agent's own namespaces and
ids stay as they are."""

from __future__ import annotations

import contextlib
import functools
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
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # a descriptor per directory level
            if mounts.contained is not None:
                _contained(procs, joins, made, mounts, (user, source))
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
    return Helper(helper)


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
    procs: list[int], joins: list[int], made: list[tuple[Tracee, Target]], mounts: Mounts, kernel: tuple[int, int]
) -> None:
    """:func:`_made_inside` in a container, whose root has no ``CAP_SYS_ADMIN``: what needs it is done by a process
    of the programs' user, who made the first copies' user namespaces and so holds every capability in them and
    in theirs (:func:`acting_ids.act_as`), from the kernel's own namespace: the maps, and each copy's mounts, made in
    a process of its own that joins the copy's namespaces (a namespace joined cannot be left). That user's files
    in a copy's namespace are no one's, where none can be made: so the files are copied from here, read as the
    kernel's user and written as the copy's, into the copy's mounts as its root shows them."""
    user, source = kernel
    assert mounts.contained is not None
    status = os.open("status", os.O_RDONLY | os.O_CLOEXEC, dir_fd=source)
    try:
        lines = dict(line.split(":", 1) for line in os.read(status, 1 << 16).decode().splitlines() if ":" in line)
    finally:
        os.close(status)
    reading = (int(lines["Uid"].split()[1]), int(lines["Gid"].split()[1]))  # the kernel's, as this process sees them
    contained = mounts.contained

    def maps_and_mounts() -> None:
        acting_ids.act_as(*contained, (linux.CAP_SETUID, linux.CAP_SETGID))
        if os.readlink(f"/proc/self/fd/{user}") != os.readlink("/proc/self/ns/user"):
            linux.setns(user, linux.CLONE_NEWUSER)  # a copy's copy: from its kernel's namespace
        for proc, (_, target) in zip(procs, made, strict=True):
            _write_maps(proc, target)
        for proc, (_, target) in zip(procs, made, strict=True):
            if not target.keeps:
                mount = functools.partial(_mount_in, proc, target, mounts)
                acting_ids.in_child(mount, "a copy's files could not be mounted")

    acting_ids.in_child(maps_and_mounts, "the copies' id maps and mounts could not be made")
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
            copy_tree(old, new, target.owner, count, ids)


def _mount_in(proc: int, target: Target, mounts: Mounts) -> None:
    """A copy's own scratch directory and ``/dev/shm``, mounted in its namespaces, which this process joins (a
    process of its own: see :func:`acting_ids.in_child`)."""
    for name, kind in (("ns/user", linux.CLONE_NEWUSER), ("ns/mnt", linux.CLONE_NEWNS)):
        ns = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
        linux.setns(ns, kind)
        os.close(ns)
    # Both the copy's (a container's /dev/shm is root's, whom the copy's namespace does not map: its times and mode
    # could not be set as the session's).
    for point, options in ((mounts.scratch, mounts.scratch_options), (mounts.shm, mounts.shm_options)):
        owned = f"{options},uid={target.uid},gid={target.gid}"
        linux.mount("tmpfs", point, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, owned)


class Helper:
    """The process making the copies' files (:func:`start`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def wait(self) -> None:
        """Once it is done: what it could not do is raised."""
        if not self.pid:
            return
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        code = os.waitstatus_to_exitcode(status)
        if code == 3:
            raise TooMany(f"the session holds more than {MAX_FILES} files and directories: too many to copy")
        if code != 0:
            raise TraceFailed(0, "the copies' namespaces could not be made")

    def stop(self) -> None:
        """End it where it still runs (the fork is refused), and take its end."""
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            self.pid = 0
