"""A fork's copies' mappings (``kernel_copy.py``): every mapping of the kernel's that a copy must not share, made
one of the copy's own.

Which: every shared mapping a process of the session could write (an anonymous one; a file's on a file system
mounted writable anywhere in its namespace), and every mapping of a file of its own (on its ``writable`` file
systems, its scratch directory and ``/dev/shm``: the pages a private mapping never wrote follow the file, which
its session's continuation may change). A shared mapping of a file no mount lets anyone write (the interpreter's
libraries, read-only) is no channel, and stays as it is.

A mapping of a file of the session's own that is where its path says (its device and inode, as ``maps`` tells)
becomes the same mapping of the copy's copy of that file (``copy_files``), at the same offset, once the copy's
files are made: a shared one writes the copy's file, two of them share, and past the file's end is SIGBUS, as in
the kernel; a private one is given the pages the kernel had written in it (``pagemap``: its anonymous pages),
the rest follows the copy's file. Any other (anonymous shared memory, a ``memfd``, a file deleted while mapped)
becomes a private anonymous mapping holding the same bytes: such a mapping shares no more with another of the
same object.

What they hold is read once, for every copy, and only where the kernel holds a page (its page table or its file's
cache, as ``mincore`` tells): reading the rest would make someone hold it (a mapping never touched would become
each copy's memory). The rest reads as zeros in the copy, as it does in the kernel (holes of a shared memory
file, past the end of a file). It is read through a plain clone of the kernel, not the kernel itself: a page the
kernel holds only in a file's cache would be put in its page table, and counted as its memory from then on (a
fork refused after that left the session over its limit). The pages held are bounded by a copy's memory, and
are passed on in pieces: the agent holds one at a time.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from . import process_memory
from .process_memory import read_memory
from .ptrace_calls import Call, Earlier, TraceFailed

_PAGE = 4096
_PIECE = 1 << 20  # bytes the agent holds at once as it passes them on
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED = 0x01, 0x02, 0x10
_MAP_PRIVATE_ANONYMOUS_FIXED = _MAP_PRIVATE | 0x20 | _MAP_FIXED
_AT_FDCWD = -100
_PATH_MAX = 4096
MOST_DIRECTORIES = 10_000  # directories opened in all to look the mapped files' names up (microseconds each)
# Mappings a fork makes again in each copy (shared ones, and those of the session's own files: a few calls each,
# and what they hold written), the agent's work that no session's CPU time pays for: a session may hold 65,530.
MOST_MAPPINGS = 1000
_GUARDED = bytes(1 if b & 0x04 else 0 for b in range(256))  # pagemap's bit 58 (a guard page), in its byte 7
_MOST_FILES = 10_000  # entries looked at for a mapped file's other name (as many as a copy may be given)
_O_CLOEXEC = 0o2000000
BATCH = 48  # calls in one program (room is left for a copy's channels: copy_making.py)


class TooLarge(Exception):
    """More pages held in mappings a copy must have its own of than a copy's memory."""


class Uncopyable(Exception):
    """Memory a copy could not have as the kernel has it."""


def check_carried(kernel: int, clone: int) -> None:
    """Refuse where a clone of ``kernel`` lacks a mapping of it: memory the session marked not to be carried into
    a fork (``MADV_DONTFORK``), which no copy (the session's continuation among them) would have."""
    if _ranges(kernel) - _ranges(clone):
        raise Uncopyable("the session marked memory not to be carried into forks (MADV_DONTFORK): copies would lack it")


def _ranges(pid: int) -> set[bytes]:
    with open(f"/proc/{pid}/maps", "rb") as f:
        return {line.split(b" ", 1)[0] for line in f}


@dataclass
class Mapping:
    """A mapping a copy gets its own of: where, how large, its protection, and the runs (address, length) of the
    pages the kernel holds in it (that the copy is given); for a file of the session's own, its path (in the
    kernel's namespace, and the copy's), offset and sharing."""

    start: int
    size: int
    prot: int
    held: list[tuple[int, int]] = field(default_factory=list)
    path: bytes = b""
    offset: int = 0
    shared: bool = False
    writes: bool = False  # a shared one whose file was opened for writing (it may be made writable: mprotect)


def choose(kernel: int, writable: set[str], points: tuple[str, ...]) -> list[Mapping]:
    """The mappings of ``kernel`` a copy must have its own of. ``writable``: the devices of the session's own
    files, mounted at ``points`` in its namespace (and the copy's)."""
    fixed = _read_only_devices(kernel)
    chosen = []
    files: dict[tuple[str, int], list[Mapping]] = {}  # by device and inode: mappings of the session's own files
    named: dict[tuple[tuple[str, int], bytes], bytes] = {}
    walked = 0  # directories opened to look the names up, in all
    with open(f"/proc/{kernel}/maps", "rb") as f:
        for line in f:
            fields = line.rstrip(b"\n").split(maxsplit=5)
            start, end = (int(x, 16) for x in fields[0].split(b"-"))
            perms, device = fields[1].decode(), fields[3].decode()
            if (perms[3] == "s" and device not in fixed) or device in writable:
                prot = (1 if perms[0] == "r" else 0) | (2 if perms[1] == "w" else 0) | (4 if perms[2] == "x" else 0)
                mapping = Mapping(start, end - start, prot, offset=int(fields[2], 16), shared=perms[3] == "s")
                if device in writable and int(fields[4]):
                    key, name = (device, int(fields[4])), fields[5] if len(fields) == 6 else b""
                    files.setdefault(key, []).append(mapping)
                    if (key, name) not in named:  # a file mapped again and again is looked for once
                        walked += name.count(b"/")
                        if walked > MOST_DIRECTORIES:
                            raise TooLarge("the session's mapped files lie too deep to be looked up for a copy")
                        named[key, name] = _named(kernel, name, device, key[1], points)
                    mapping.path = named[key, name]
                chosen.append(mapping)
                if len(chosen) > MOST_MAPPINGS:
                    raise TooLarge(
                        f"the session holds more than {MOST_MAPPINGS} mappings a copy must make again (shared memory, "
                        "its own files): too many to map again"
                    )
    # A name that is not the file's (unlinked, one ``maps`` escapes): found by its inode (another link of it).
    unnamed = {key for key, mappings in files.items() if not all(m.path for m in mappings)}
    for key, path in _find(kernel, points, unnamed).items():
        for m in files[key]:
            m.path = path
    if any(len(m.path) >= _PATH_MAX for m in chosen):
        raise TooLarge("a file the session maps has a path longer than a path may be: it cannot be mapped again")
    if any(m.path and m.shared for m in chosen):
        _writes(kernel, [m for m in chosen if m.path and m.shared])
    return chosen


def _named(kernel: int, name: bytes, device: str, inode: int, points: tuple[str, ...]) -> bytes:
    """``name`` (as ``maps`` writes it) where it is the file mapped (its device and inode), under one of ``points``,
    reached with no link followed; empty where it is not (deleted, renamed, a name ``maps`` escapes)."""
    if b"\\" in name or name.endswith(b" (deleted)"):
        return b""
    return name if identity(b"/proc/%d/root" % kernel, name, points) == (device, inode) else b""


def identity(root: bytes, name: bytes, points: tuple[str, ...], kind: int = stat.S_IFREG) -> tuple[str, int] | None:
    """The device and inode of the regular file (or other ``kind``) ``name`` (absolute, under one of ``points``)
    in the namespace whose root is ``root``: each directory below the mount point opened with no link followed,
    as the file itself (a name a program made a link would reach elsewhere); None where it is not one."""
    point = next((os.fsencode(p) for p in points if name.startswith(os.fsencode(p) + b"/")), None)
    if point is None:
        return None
    *directories, last = parts = name[len(point) + 1 :].split(b"/")
    if any(part in (b"", b".", b"..") for part in parts):  # a name maps writes has none: it would leave the mount
        return None
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root + point, flags)
    except OSError:
        return None
    try:
        for directory in directories:
            inner = os.open(directory, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
        info = os.stat(last, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)
    return (device(info.st_dev), info.st_ino) if stat.S_IFMT(info.st_mode) == kind else None


def _find(kernel: int, points: tuple[str, ...], wanted: set[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
    """A path, under ``points`` in ``kernel``'s namespace, of each file of ``wanted`` (device and inode) that has
    one: walked directory by directory, nothing followed."""
    found: dict[tuple[str, int], bytes] = {}
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    pending: list[tuple[int, bytes]] = []
    try:
        for point in points if wanted else ():
            pending.append((os.open(f"/proc/{kernel}/root{point}", flags), os.fsencode(point)))
        seen = 0
        while pending and len(found) < len(wanted):
            fd, path = pending.pop()
            try:
                for name in os.listdir(fd):
                    seen += 1
                    if seen > _MOST_FILES:
                        return found
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    here = path + b"/" + os.fsencode(name)
                    if stat.S_ISDIR(info.st_mode):
                        pending.append((os.open(name, flags, dir_fd=fd), here))
                    elif stat.S_ISREG(info.st_mode) and (device(info.st_dev), info.st_ino) in wanted:
                        found.setdefault((device(info.st_dev), info.st_ino), here)
            finally:
                os.close(fd)
    finally:
        for fd, _ in pending:
            os.close(fd)
    return found


def _writes(kernel: int, shared: list[Mapping]) -> None:
    """Which of ``shared`` (mappings of the session's files) may be made writable: their files were opened for
    writing (``smaps``' ``mw``). The copy's file is opened as the kernel's was, no more."""
    by_start = {m.start: m for m in shared}
    at = None
    with open(f"/proc/{kernel}/smaps", "rb") as f:
        for line in f:
            if line[:1] in b"0123456789abcdef" and b"-" in line.split(maxsplit=1)[0]:
                at = by_start.get(int(line.split(b"-", 1)[0], 16))
            elif at is not None and line.startswith(b"VmFlags:"):
                at.writes = b"mw" in line.split()[1:]
                at = None


def device(dev: int) -> str:
    """A device number as ``/proc/PID/maps`` writes it."""
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"


def find_held(
    reader: int,
    chosen: list[Mapping],
    run: Callable[[list[Call]], list[int]],
    mmap: Callable[[int], int],
    most: int,
) -> None:
    """Which pages of ``chosen`` the kernel holds, asked (``mincore``, made by ``run`` into memory ``mmap`` makes)
    in ``reader``, a clone of it that shares them: into each mapping's ``held``. Of a private mapping of a file of
    the session's own, only the pages it wrote (the rest follows the copy's file); of a shared one, none (its
    file holds them). More than ``most`` bytes held is :class:`TooLarge`."""
    asked = [m for m in chosen if not m.path]
    pages = sum(m.size for m in asked) // _PAGE
    if asked:
        vector = mmap((pages + _PAGE - 1) // _PAGE * _PAGE)  # a byte a page: what mincore answers in (the reader's)
        calls: list[Call] = []
        at = vector
        for m in asked:
            calls.append(("mincore", (m.start, m.size, at)))
            at += m.size // _PAGE
        for i in range(0, len(calls), BATCH):
            for result in run(calls[i : i + BATCH]):
                if result < 0:
                    raise TraceFailed(-result, f"mincore in process {reader}: {os.strerror(-result)}")
        resident = read_memory(reader, vector, pages)
        at = 0
        for m in asked:
            count = m.size // _PAGE
            m.held = _runs(m.start, [bool(bit & 1) for bit in resident[at : at + count]])
            at += count
    with open(f"/proc/{reader}/pagemap", "rb", buffering=0) as f:
        for m in chosen:
            raw = os.pread(f.fileno(), m.size // _PAGE * 8, m.start // _PAGE * 8)
            if b"\x01" in raw[7::8].translate(_GUARDED):
                raise Uncopyable("the session guards pages (MADV_GUARD_INSTALL) of memory a copy is given its own of")
            if m.path and not m.shared:
                entries = struct.unpack(f"<{len(raw) // 8}Q", raw)
                # Present and not the file's (an anonymous page: written), or swapped out (only those are).
                m.held = _runs(m.start, [bool((e >> 63 & 1 and not e >> 61 & 1) or e >> 62 & 1) for e in entries])
    total = sum(length for m in chosen for _, length in m.held)
    if total > most:
        raise TooLarge(f"the session's shared mappings hold more than a copy's memory ({most >> 20} MiB)")


def _runs(start: int, pages: list[bool]) -> list[tuple[int, int]]:
    """The runs (address, length) of the pages marked in ``pages``, from ``start``."""
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(pages):
        if not pages[i]:
            i += 1
            continue
        j = i
        while j < len(pages) and pages[j]:
            j += 1
        runs.append((start + i * _PAGE, (j - i) * _PAGE))
        i = j
    return runs


def mmap_calls(mappings: list[Mapping]) -> list[Call]:
    """The calls that make ``mappings`` (none of a file of the session's own) anonymous private ones (empty until
    :func:`fill`), in one program."""
    return [("mmap", (m.start, m.size, m.prot, _MAP_PRIVATE_ANONYMOUS_FIXED, -1, 0)) for m in mappings]


def file_calls(m: Mapping, path: int, first: int) -> list[Call]:
    """The calls that map a file of the session's own (the copy's, its path written at ``path``) as ``m`` mapped
    the kernel's: opened, mapped over ``m`` at its offset (the second call's result must be ``m.start``), closed;
    the first of them call ``first`` of its program."""
    opened = os.O_RDWR if m.writes else os.O_RDONLY  # a private one writes its own pages, never the file
    flags = (_MAP_SHARED if m.shared else _MAP_PRIVATE) | _MAP_FIXED
    return [
        # Its path is one with no link (:func:`identity`), in a tree copied from the kernel's; and never waited on.
        ("openat", (_AT_FDCWD, path, opened | os.O_NOFOLLOW | os.O_NONBLOCK | _O_CLOEXEC)),
        ("mmap", (m.start, m.size, m.prot, flags, Earlier(first), m.offset)),
        ("close", (Earlier(first),)),
    ]


def check_made(mappings: list[Mapping], got: list[int]) -> None:
    """Refuse what :func:`mmap_calls` made anywhere but where it asked."""
    if [m.start for m in mappings] != got:
        raise TraceFailed(0, "a mapping was not made where it was asked")


def make(run: Callable[[list[Call], int], list[int]], mappings: list[Mapping]) -> None:
    """``mappings`` made anonymous private ones of the copy ``run`` makes calls in, :data:`BATCH` at a time."""
    for i in range(0, len(mappings), BATCH):
        batch = mappings[i : i + BATCH]
        check_made(batch, run(mmap_calls(batch), len(batch)))


def fill(reader: int, copies: list[int], mappings: list[Mapping]) -> None:
    """Write what the kernel holds in ``mappings``, read through ``reader`` (a clone of it that shares them), into
    each of ``copies`` (made by :func:`make`), a piece at a time."""
    if not mappings or not copies:
        return
    source = process_memory.open_memory(reader, os.O_RDONLY)
    targets = [process_memory.open_memory(pid, os.O_RDWR) for pid in copies]
    try:
        for m in mappings:
            for address, length in m.held:
                for at in range(address, address + length, _PIECE):
                    piece = os.pread(source, min(_PIECE, address + length - at), at)
                    for pid, target in zip(copies, targets, strict=True):
                        if os.pwrite(target, piece, at) != len(piece):
                            raise TraceFailed(0, f"a short write into process {pid}")
    finally:
        for fd in (source, *targets):
            os.close(fd)


def _read_only_devices(kernel: int) -> set[str]:
    """The devices (as ``/proc/PID/maps`` writes them) every mount of which in ``kernel``'s namespace is
    read-only."""
    ro: set[str] = set()
    rw: set[str] = set()
    with open(f"/proc/{kernel}/mountinfo") as f:
        for line in f:
            fields = line.split()
            major, minor = (int(x) for x in fields[2].split(":"))
            device = f"{major:02x}:{minor:02x}"
            (ro if "ro" in fields[5].split(",") else rw).add(device)
    return ro - rw
