"""What copies a session's kernel, on a real process: calls made in it as one program (``Tracee.run``), its
clones, and the mappings a copy is given its own of (with the pages the kernel holds in them, and no more),
bounded by a copy's memory.

The process stands in for a kernel: it waits in ``read``, as a kernel waits for a cell, and goes on as it was
once let go.
"""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from codegym_sandbox.agent import copy_mappings, kernel_copy, ptrace_calls

pytestmark = pytest.mark.skipif(not ptrace_calls.SUPPORTED, reason="a kernel is copied on x86_64 only")

WAITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
maps = [mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ) for _ in range(3)]
big = mmap.mmap(-1, 64 << 20, mmap.MAP_SHARED)  # shared memory, two pages of it touched
big[0] = big[10 * 4096] = 7
print('ready', flush=True)
got = os.read(int(sys.argv[2]), 16)
print('read', got.decode(), flush=True)
"""


@pytest.fixture
def waiting(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """A process waiting in ``read`` on a pipe, with a file mapped shared three times; the pipe's write end."""
    mapped = tmp_path / "mapped.bin"
    mapped.write_bytes(bytes(range(256)) * 64)  # four pages
    r, w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(mapped), str(r)], stdout=subprocess.PIPE, text=True, pass_fds=(r,)
    )
    os.close(r)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc, w, mapped
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        os.close(w)


def _seize(pid: int) -> ptrace_calls.Tracee:
    return ptrace_calls.Tracee.seize(pid, lambda regs: regs.orig_rax == ptrace_calls.NR["read"])


def test_calls_made_as_one_program_answer_each_and_the_process_goes_on(
    waiting: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, w, _ = waiting
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)
    calls: list[ptrace_calls.Call] = [("close", (999,)), ("dup3", (1, 57, 0)), ("close", (57,))]
    got = tracee.run(page, page + 2 * mmap.PAGESIZE, calls)
    assert got == [-errno.EBADF, 57, 0]
    assert tracee.checked("munmap", page, 4 * mmap.PAGESIZE) == 0
    tracee.release(stopped=False)
    os.write(w, b"cell")  # its wait, made again as it goes on, reads what comes
    assert proc.stdout is not None and proc.stdout.readline() == "read cell\n"
    assert proc.wait(10) == 0


def test_clones_made_as_one_program_are_each_seen_stopped(waiting: tuple[subprocess.Popen[str], int, Path]) -> None:
    proc, w, _ = waiting
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)
    children: list[ptrace_calls.Tracee] = []
    got = tracee.run(
        page, page + 2 * mmap.PAGESIZE, [("clone", (17, 0, 0, 0, 0))] * 3, on_event=_collect(tracee, children)
    )
    try:
        assert len(children) == 3 and all(pid > 0 for pid in got)
        for child in children:  # stopped before its first instruction, in the parent's wait
            with open(f"/proc/{child.pid}/stat") as f:
                assert f.read().rsplit(")", 1)[1].split()[0] == "t"
    finally:
        for child in children:
            kernel_copy._kill(child.pid)
    tracee.checked("munmap", page, 4 * mmap.PAGESIZE)
    tracee.release(stopped=False)
    os.write(w, b"x")
    assert proc.stdout is not None and proc.stdout.readline() == "read x\n"


def _collect(parent: ptrace_calls.Tracee, into: list[ptrace_calls.Tracee]) -> Callable[[int], None]:
    def event(kind: int) -> None:
        if kind == ptrace_calls.EVENT_FORK:
            pid = parent.fork_event()
            ptrace_calls.wait_stop(pid)
            into.append(ptrace_calls.Tracee(pid, parent.saved))

    return event


def test_shared_mappings_are_found_with_the_pages_held_and_bounded_by_a_copys_memory(
    waiting: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, w, mapped = waiting
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)

    def run(calls: list[ptrace_calls.Call]) -> list[int]:
        return tracee.run(page, page + 2 * mmap.PAGESIZE, calls)

    before = _rss_kb(proc.pid)
    try:
        found = copy_mappings.find(tracee, set(), run, 1 << 20)
        # The file's three mappings (on a writable file system), whole; the shared memory, only its two pages.
        files = [m for m in found if m.size == 4 * mmap.PAGESIZE and m.prot == mmap.PROT_READ]
        assert len(files) == 3 and all(m.held == [(m.start, m.size)] for m in files), found
        assert all(ptrace_calls.read_memory(proc.pid, m.start, m.size) == mapped.read_bytes() for m in files)
        (big,) = [m for m in found if m.size == 64 << 20]
        assert big.held == [(big.start, mmap.PAGESIZE), (big.start + 10 * mmap.PAGESIZE, mmap.PAGESIZE)]
        assert _rss_kb(proc.pid) - before < 1024  # nothing untouched was made the kernel's memory
        # Three mappings of four pages and two pages: past a copy's memory of 8 pages, no copy is made.
        with pytest.raises(copy_mappings.TooLarge, match="shared mappings"):
            copy_mappings.find(tracee, set(), run, 8 * mmap.PAGESIZE)
    finally:
        tracee.checked("munmap", page, 4 * mmap.PAGESIZE)
        tracee.release(stopped=False)
    os.write(w, b"y")
    assert proc.stdout is not None and proc.stdout.readline() == "read y\n"


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
