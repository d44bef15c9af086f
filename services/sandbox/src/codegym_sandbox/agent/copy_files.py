"""A fork's copies' files and ids (``kernel_copy.py``): each copy's user namespace's id maps, and in its mount
namespace new tmpfs mounts for its scratch directory and ``/dev/shm`` holding a copy of its parent's files, owned
by its user, and a devpts instance of its own. Made by a helper process, so that the agent's own namespaces and
ids stay as they are."""

from __future__ import annotations

import os
import resource
import shutil
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import linux
from .ptrace_calls import TraceFailed

if TYPE_CHECKING:
    from .memory_cgroup import MemoryCgroup
    from .ptrace_calls import Tracee
    from .run_cgroup import RunCgroup

MAX_FILES = 10_000  # files and directories a copy may be given (copying them is the agent's time)


@dataclass
class Target:
    """One copy to make: its id maps (lines of ``uid_map`` in the agent's namespace's ids), the uid and gid its
    programs have inside, and the cgroups it is put in."""

    uid_map: str
    gid_map: str
    uid: int
    gid: int
    owner: int  # the copy's files' owner, as the agent sees it
    memory: MemoryCgroup | None
    meter: RunCgroup | None
    # The session's own continuation: it keeps its files, descriptors and mappings, which it shares with nothing
    # but the kernel it continues (killed once copied); every other copy gets its own.
    keeps: bool = False


@dataclass
class Mounts:
    """Where a kernel's files are, and how the copies' own mounts are made."""

    scratch: str
    scratch_options: str  # tmpfs options, less the owner (each copy's own)
    shm: str
    shm_options: str
    devpts_options: str


class TooMany(Exception):
    """More files than a copy may be given."""


def prepare(made: list[tuple[Tracee, Target]], kernel: int, mounts: Mounts) -> None:
    """Each copy's id maps, and in its mount namespace new tmpfs mounts for its scratch directory and
    ``/dev/shm`` holding a copy of the kernel's (owned by the copy's user), and a devpts instance of its own.
    Done by a helper process, in the kernel's user namespace (where the copies' namespaces begin, and where a
    map's ids are read), entering each copy's mount namespace in turn: the agent's own stay as they are."""
    # Every process's /proc entry opened first: once in a copy's mount namespace, /proc is its box's (another
    # pid namespace's numbers).
    procs = [os.open(f"/proc/{child.pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for child, _ in made]
    # The files each copy is given are its memory: written from its own memory cgroup (joined by a descriptor
    # opened here, before the helper's ids change).
    joins = [target.memory.procs() if target.memory is not None else -1 for _, target in made]
    user = os.open(f"/proc/{kernel}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            if os.readlink(f"/proc/{kernel}/ns/user") != os.readlink("/proc/self/ns/user"):
                # A copy's copy: its maps are read in its parent's namespace, where the agent's root has no id: the
                # files it makes are the kernel's user's (a file system of that namespace takes no unmapped owner).
                linux.setns(user, linux.CLONE_NEWUSER)
                linux.set_file_ids(made[0][1].uid, made[0][1].gid)
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # a descriptor per directory level
            for proc, join, (_, target) in zip(procs, joins, made, strict=True):
                for name, lines in (("setgroups", "deny"), ("uid_map", target.uid_map), ("gid_map", target.gid_map)):
                    fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=proc)
                    try:
                        os.write(fd, lines.encode())
                    finally:
                        os.close(fd)
                if target.keeps:
                    continue
                ns = os.open("ns/mnt", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
                linux.setns(ns, linux.CLONE_NEWNS)
                os.close(ns)
                if join >= 0:
                    os.write(join, b"0")
                owner, count = target.owner, [0]
                for point, options in ((mounts.scratch, mounts.scratch_options), (mounts.shm, mounts.shm_options)):
                    old = os.open(point, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    owned = f"{options},uid={owner},gid={owner}" if point == mounts.scratch else options
                    linux.mount("tmpfs", point, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, owned)
                    _copy_tree(old, point, owner, count)
                    os.close(old)
                linux.mount("devpts", "/dev/pts", "devpts", linux.MS_NOSUID | linux.MS_NOEXEC, mounts.devpts_options)
            code = 0
        except TooMany:
            code = 3
        finally:
            os._exit(code)
    for fd in (*procs, *joins, user):
        if fd >= 0:
            os.close(fd)
    _, status = os.waitpid(helper, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        raise TooMany(f"the session holds more than {MAX_FILES} files and directories: too many to copy")
    if code != 0:
        raise TraceFailed(0, "the copies' namespaces could not be made")


def _copy_tree(source: int, into: str, owner: int, count: list[int]) -> None:
    """Copy the tree under the directory ``source`` (a descriptor) into the directory ``into``: directories,
    files, links and fifos, with their modes and times, owned by ``owner``; nothing is followed. Directory by
    directory, each reached by a descriptor (no path grows with the tree's depth); ``count`` counts what was
    copied, at most :data:`MAX_FILES`."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    pending = [(os.dup(source), os.open(into, flags))]
    while pending:
        src, dst = pending.pop()
        try:
            for name in os.listdir(src):
                count[0] += 1
                if count[0] > MAX_FILES:
                    raise TooMany
                info = os.stat(name, dir_fd=src, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    os.mkdir(name, 0o700, dir_fd=dst)
                    pending.append((os.open(name, flags, dir_fd=src), os.open(name, flags, dir_fd=dst)))
                elif stat.S_ISREG(info.st_mode):
                    # Without waiting: a lease a program holds on it would hold the fork (and the worker) for
                    # the lease's break time; it fails at once instead, and the fork is refused.
                    reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=src)
                    writer = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dst)
                    try:
                        with open(reader, "rb", closefd=False) as r, open(writer, "wb", closefd=False) as w:
                            shutil.copyfileobj(r, w, 1 << 20)
                    finally:
                        os.close(reader)
                        os.close(writer)
                elif stat.S_ISLNK(info.st_mode):
                    os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                elif stat.S_ISFIFO(info.st_mode):
                    os.mkfifo(name, dir_fd=dst)
                else:
                    continue  # a socket or a device node: nothing a copy can hold
                os.chown(name, owner, owner, dir_fd=dst, follow_symlinks=False)
                if not stat.S_ISLNK(info.st_mode):
                    os.chmod(name, stat.S_IMODE(info.st_mode), dir_fd=dst)
                os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst, follow_symlinks=False)
        finally:
            os.close(src)
            os.close(dst)
