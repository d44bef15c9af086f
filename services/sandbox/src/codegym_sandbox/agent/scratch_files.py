"""The files of a run, in the box's scratch directory: written there before it, collected after it.

The agent reaches that directory only through the box's descriptor of it (``BoxHandle.scratch``), and never
follows a symlink there: the program controls what it holds.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import stat
import time

from . import acting_ids
from .box_handle import BoxHandle
from .memory_cgroup import MemoryCgroup
from .protocol import MAX_HEADER, FileEntry, write_all


def open_in_scratch(bx: BoxHandle, name: str, flags: int, mode: int = 0o644, uid: int | None = None) -> int:
    """Open a file under the box's scratch directory without following any symlink on the way.

    The program controls that directory: a symlinked component must not lead the agent (which sees the
    host) anywhere else. With ``uid``, missing directories are created and given to the program.
    """
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad file name {name!r}")
    dir_fd = os.dup(bx.scratch)
    try:
        for part in parts[:-1]:
            if uid is not None:
                try:
                    os.mkdir(part, 0o755, dir_fd=dir_fd)
                    os.chown(part, uid, bx.config.get("program_gid", uid), dir_fd=dir_fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def write_files(bx: BoxHandle, files: list[FileEntry], blobs: list[bytearray], uid: int) -> None:
    gid = bx.config.get("program_gid", uid)
    for name, mode, index in files:
        fd = open_in_scratch(bx, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, uid)
        try:
            write_all(fd, blobs[index])
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def write_charged(
    bx: BoxHandle, files: list[FileEntry], blobs: list[bytearray], uid: int, memory: MemoryCgroup | None
) -> None:
    """:func:`write_files` from a child process that joined ``memory``, the cgroup whose limit holds them (a
    session's), so that the kernel charges their pages, inodes and dentries there rather than to the agent, whose
    cgroup is the server's; by the agent itself where the worker has no cgroup of its own to join (a container's
    is the agent's already)."""
    if memory is None or memory.parent_fd < 0:
        write_files(bx, files, blobs, uid)
        return
    procs = memory.procs()

    def work() -> None:
        os.write(procs, b"0")
        write_files(bx, files, blobs, uid)

    try:
        acting_ids.in_child(work, "the files could not be written from the session's memory cgroup")
    finally:
        os.close(procs)


# What a step's files' names may take, listed in the header of the agent's answer, which the server bounds (a
# program that made 70,000 files with long names for ``*`` broke it, and its worker was replaced). Past what a
# run's own header lists (MAX_HEADER), one more is given back: a compile that made more than its runs can be
# given is the server's to call a compile error (``languages.unrunnable``).
LISTED_MAX = MAX_HEADER
# Patterns (``*``) a step matches at most, against at most this many entries: each pair costs the agent's time,
# which no run is charged (4,000 patterns over 10,000 files once took 6 s and 326 MiB).
MAX_PATTERNS = 16
SCANNED = 1 << 16
MATCH_S = 0.5  # and for so long at most: a pattern of many '*' and '?' costs a long name much more than a short one


def collect(bx: BoxHandle, names: list[str], limit: int) -> tuple[list[FileEntry], list[bytes]]:
    """The regular files of ``names`` (``*`` patterns match the top of the scratch directory: the names given
    first, then the matches), each once, until their names take :data:`LISTED_MAX` bytes and ``limit`` bytes in
    all: a sparse file, or a thousand links to one, costs the program nothing, and every byte read here is held
    by the agent and then the server."""
    found: list[FileEntry] = []
    blobs: list[bytes] = []
    patterns = [n for n in dict.fromkeys(names) if "*" in n][:MAX_PATTERNS]
    names = [n for n in names if "*" not in n]
    if patterns:  # they match entries at the top of the scratch directory, the first SCANNED of them
        matches = re.compile("|".join(fnmatch.translate(n) for n in patterns)).match
        deadline = time.monotonic() + MATCH_S
        with os.scandir(bx.scratch) as entries:
            for i, entry in enumerate(itertools.islice(entries, SCANNED)):
                if matches(entry.name):
                    names.append(entry.name)
                if i % 64 == 0 and time.monotonic() > deadline:
                    break
    left, listed = limit, 0
    for name in dict.fromkeys(names):
        if listed > LISTED_MAX:
            break
        try:
            fd = open_in_scratch(bx, name, os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, ValueError):
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > left:
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(left)
        finally:
            os.close(fd)
        left -= len(data)
        listed += len(name.encode("utf-8", "surrogateescape")) + 16  # as a header lists it, about
        found.append((name, st.st_mode & 0o777, len(blobs)))
        blobs.append(data)
    return found, blobs
