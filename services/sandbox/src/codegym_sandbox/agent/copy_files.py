"""A fork's copies' files and ids (``kernel_copy.py``): each copy's user namespace's id maps, and in its mount
namespace new tmpfs mounts for its scratch directory and ``/dev/shm`` holding a copy of its parent's files, owned
by its user, and a devpts instance of its own. Made by a helper process, so that the agent's own namespaces and
ids stay as they are."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import acting_ids, linux
from .ptrace_calls import TraceFailed

if TYPE_CHECKING:
    from .memory_cgroup import MemoryCgroup
    from .pids_cgroup import PidsCgroup
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


class TooMany(Exception):
    """More files than a copy may be given."""


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
            _copy_tree(old, new, target.owner, count, _Ids())
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
        ids, count = _Ids(reading, target.owner), [0]
        for point in (mounts.scratch, mounts.shm):
            ids.read()
            old = os.open(f"root{point}", flags, dir_fd=source)
            ids.write()
            new = os.open(f"root{point}", flags, dir_fd=proc)
            _copy_tree(old, new, target.owner, count, ids)


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


class _Ids:
    """The file ids a copy's files are read and written with: in a container, the kernel's user's and the copy's
    (no one id may do both there); on the local backend the helper's own, throughout."""

    def __init__(self, reading: tuple[int, int] | None = None, writing: tuple[int, int] | None = None) -> None:
        self.reading, self.writing = reading, writing

    def read(self) -> None:
        if self.reading is not None:
            linux.set_file_ids(*self.reading)

    def write(self) -> None:
        if self.writing is not None:
            linux.set_file_ids(*self.writing)


def _copy_tree(source: int, into: int, owner: tuple[int, int], count: list[int], ids: _Ids) -> None:
    """Copy the tree under the directory ``source`` into the directory ``into`` (descriptors, both closed here):
    directories, files (their holes as holes, their hard links as links), links and fifos, with their modes and
    times (a directory's once its entries are made, the top's last), owned by ``owner``; nothing is followed.
    Directory by directory, each reached by a descriptor (no path grows with the tree's depth, but those of a hard
    link's first name and of a directory whose times are set at the end: where one is too long, the link is a
    copy, the times are the copy's); ``count`` counts what was copied, at most :data:`MAX_FILES`."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    pending = [(os.dup(source), os.dup(into), "")]
    walk = _Walk(into, flags, pending, {}, [], ids)
    try:
        while pending:
            src, dst, path = pending.pop()
            try:
                # tmpfs lists a directory's newest entry first: made in the reverse of the order listed, the copy
                # lists its entries as the session's does.
                ids.read()
                for name in reversed(os.listdir(src)):
                    count[0] += 1
                    if count[0] > MAX_FILES:
                        raise TooMany
                    _copy_entry(src, dst, name, path, owner, walk)
            finally:
                os.close(src)
                os.close(dst)
        ids.write()
        for path, atime, mtime in reversed(walk.times):  # the deepest first: setting one changes no other
            with contextlib.suppress(OSError):
                os.utime(path, ns=(atime, mtime), dir_fd=into, follow_symlinks=False)
        ids.read()
        top = os.fstat(source)  # the mount's own mode and times, as the session's
        ids.write()
        os.chmod(into, stat.S_IMODE(top.st_mode))
        os.utime(into, ns=(top.st_atime_ns, top.st_mtime_ns))
    finally:
        os.close(source)
        os.close(into)


@dataclass
class _Walk:
    root: int  # the copy's top directory
    flags: int
    pending: list[tuple[int, int, str]]  # directories to copy: source, copy, the copy's path under the root
    linked: dict[int, str]  # a file's inode (of more than one name): the path its first name was copied to
    times: list[tuple[str, int, int]]  # directories' times, set last (their entries change them)
    ids: _Ids


def _copy_entry(src: int, dst: int, name: str, path: str, owner: tuple[int, int], walk: _Walk) -> None:
    """One entry of a directory (see :func:`_copy_tree`)."""
    ids = walk.ids
    ids.read()
    info = os.stat(name, dir_fd=src, follow_symlinks=False)
    here = f"{path}/{name}" if path else name
    if stat.S_ISREG(info.st_mode) and info.st_ino in walk.linked:
        ids.write()
        try:
            os.link(walk.linked[info.st_ino], name, src_dir_fd=walk.root, dst_dir_fd=dst, follow_symlinks=False)
            return
        except OSError:  # a path too long: a copy of its own instead
            pass
    if stat.S_ISDIR(info.st_mode):
        ids.read()
        inner = os.open(name, walk.flags, dir_fd=src)
        ids.write()
        os.mkdir(name, 0o700, dir_fd=dst)
        walk.pending.append((inner, os.open(name, walk.flags, dir_fd=dst), here))
        walk.times.append((here, info.st_atime_ns, info.st_mtime_ns))
    elif stat.S_ISREG(info.st_mode):
        _copy_file(src, dst, name, ids)
        if info.st_nlink > 1:
            walk.linked[info.st_ino] = here
    elif stat.S_ISLNK(info.st_mode):
        ids.read()
        target = os.readlink(name, dir_fd=src)
        ids.write()
        os.symlink(target, name, dir_fd=dst)
    elif stat.S_ISFIFO(info.st_mode):
        ids.write()
        os.mkfifo(name, dir_fd=dst)
    else:
        return  # a socket or a device node: nothing a copy can hold
    ids.write()
    os.chown(name, *owner, dir_fd=dst, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(name, stat.S_IMODE(info.st_mode), dir_fd=dst)
    os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst, follow_symlinks=False)


def _copy_file(src: int, dst: int, name: str, ids: _Ids) -> None:
    """A file's bytes, its holes left holes (a sparse file costs its copy what it costs the session)."""
    # Without waiting: a lease a program holds on it would hold the fork (and the worker) for the lease's break
    # time; it fails at once instead, and the fork is refused.
    ids.read()
    reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=src)
    try:
        ids.write()
        writer = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dst)
    except BaseException:
        os.close(reader)
        raise
    try:
        size = os.fstat(reader).st_size
        at = 0
        while at < size:
            try:
                at = os.lseek(reader, at, os.SEEK_DATA)
            except OSError:  # no data past here (ENXIO): a hole to the end
                break
            end = os.lseek(reader, at, os.SEEK_HOLE)
            while at < end:
                piece = os.pread(reader, min(1 << 20, end - at), at)
                if not piece:
                    break
                os.pwrite(writer, piece, at)
                at += len(piece)
        os.ftruncate(writer, size)
    finally:
        os.close(reader)
        os.close(writer)
