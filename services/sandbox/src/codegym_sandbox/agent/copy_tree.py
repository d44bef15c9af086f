"""A tree of a session's files copied for one of its copies (``copy_files.py``): directories, files with their holes
as holes and their hard links as links, links and fifos, with their modes and times, owned by the copy's user;
nothing followed, and at most :data:`MAX_FILES` of them."""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass

from . import linux

MAX_FILES = 10_000  # files and directories a copy may be given (copying them is the agent's time)


class TooMany(Exception):
    """More files than a copy may be given."""


class FileIds:
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


def copy_tree(source: int, into: int, owner: tuple[int, int], count: list[int], ids: FileIds) -> None:
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
    ids: FileIds


def _copy_entry(src: int, dst: int, name: str, path: str, owner: tuple[int, int], walk: _Walk) -> None:
    """One entry of a directory (see :func:`copy_tree`)."""
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


def _copy_file(src: int, dst: int, name: str, ids: FileIds) -> None:
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
