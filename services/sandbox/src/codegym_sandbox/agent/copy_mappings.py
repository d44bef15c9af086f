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

from .ptrace_calls import Call, Earlier, TraceFailed, read_memory

_PAGE = 4096
_PIECE = 1 << 20  # bytes the agent holds at once as it passes them on
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED = 0x01, 0x02, 0x10
_MAP_PRIVATE_ANONYMOUS_FIXED = _MAP_PRIVATE | 0x20 | _MAP_FIXED
_AT_FDCWD = -100
_O_CLOEXEC = 0o2000000
BATCH = 48  # calls in one program (room is left for a copy's channels: copy_making.py)


class TooLarge(Exception):
    """More pages held in mappings a copy must have its own of than a copy's memory."""


@dataclass
class Mapping:
    """A mapping a copy gets its own of: where, how large, its protection, and the runs (address, length) of the
    pages the kernel holds in it (that the copy is given); for a file of the session's own, its path (in the
    kernel's namespace, and the copy's), offset and sharing."""

    start: int
    size: int
    prot: int
    held: list[tuple[int, int]] = field(default_factory=list)
    path: str = ""
    offset: int = 0
    shared: bool = False


def choose(kernel: int, writable: set[str], points: tuple[str, ...]) -> list[Mapping]:
    """The mappings of ``kernel`` a copy must have its own of. ``writable``: the devices of the session's own
    files, mounted at ``points`` in its namespace (and the copy's)."""
    fixed = _read_only_devices(kernel)
    chosen = []
    with open(f"/proc/{kernel}/maps") as f:
        for line in f:
            fields = line.rstrip("\n").split(maxsplit=5)
            start, end = (int(x, 16) for x in fields[0].split("-"))
            perms, device = fields[1], fields[3]
            if (perms[3] == "s" and device not in fixed) or device in writable:
                prot = (1 if perms[0] == "r" else 0) | (2 if perms[1] == "w" else 0) | (4 if perms[2] == "x" else 0)
                mapping = Mapping(start, end - start, prot, shared=perms[3] == "s")
                if device in writable and len(fields) == 6:
                    mapping.path = _own_file(kernel, fields[5], device, int(fields[4]), points)
                    mapping.offset = int(fields[2], 16) if mapping.path else 0
                chosen.append(mapping)
    return chosen


def _own_file(kernel: int, name: str, device: str, inode: int, points: tuple[str, ...]) -> str:
    """``name`` (as ``maps`` writes it) where it is the file mapped (its device and inode), under one of ``points``;
    "" where it is not (deleted, renamed, a name ``maps`` escapes)."""
    if "\\" in name or not any(name.startswith(f"{point}/") for point in points):
        return ""
    try:
        info = os.stat(f"/proc/{kernel}/root{name}", follow_symlinks=False)
    except OSError:
        return ""
    found = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}"
    return name if stat.S_ISREG(info.st_mode) and info.st_ino == inode and found == device else ""


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
    written = [m for m in chosen if m.path and not m.shared]
    if written:
        with open(f"/proc/{reader}/pagemap", "rb", buffering=0) as f:
            for m in written:
                entries = struct.unpack(
                    f"<{m.size // _PAGE}Q", os.pread(f.fileno(), m.size // _PAGE * 8, m.start // _PAGE * 8)
                )
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


def file_calls(m: Mapping, path: int) -> list[Call]:
    """The calls that map a file of the session's own (the copy's, its path written at ``path``) as ``m`` mapped
    the kernel's: opened, mapped over ``m`` at its offset (the second call's result must be ``m.start``), closed."""
    opened = os.O_RDWR if m.shared else os.O_RDONLY  # what a shared mapping may write (mprotect), a private never
    flags = (_MAP_SHARED if m.shared else _MAP_PRIVATE) | _MAP_FIXED
    return [
        ("openat", (_AT_FDCWD, path, opened | os.O_NOFOLLOW | _O_CLOEXEC)),
        ("mmap", (m.start, m.size, m.prot, flags, Earlier(0), m.offset)),
        ("close", (Earlier(0),)),
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
    source = os.open(f"/proc/{reader}/mem", os.O_RDONLY | os.O_CLOEXEC)
    targets = [os.open(f"/proc/{pid}/mem", os.O_RDWR | os.O_CLOEXEC) for pid in copies]
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
