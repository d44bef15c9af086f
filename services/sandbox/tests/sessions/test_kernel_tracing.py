"""What copies a session's kernel, on a real process: calls made in it as one program (``Tracee.run``), its
clones, and the mappings a copy is given its own of (with the pages the kernel holds in them, and no more),
bounded by a copy's memory.

The process stands in for a kernel: it waits in ``read``, as a kernel waits for a cell, and goes on as it was
once let go.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from codegym_sandbox.agent import copy_making, copy_mappings, kernel_copy, process_memory, ptrace_calls, ptrace_each
from codegym_sandbox.agent.copy_files import Target

pytestmark = pytest.mark.skipif(not ptrace_calls.SUPPORTED, reason="a kernel is copied on x86_64 only")

WAITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
maps = [mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ) for _ in range(3)]
big = mmap.mmap(-1, 64 << 20, mmap.MAP_SHARED)  # shared memory, two pages of it touched
big[0] = big[10 * 4096] = 7
print('ready', flush=True)
got = os.read(int(sys.argv[-1]), 16)
print('read', got.decode(), flush=True)
"""


@contextlib.contextmanager
def _started(script: str, *args: str) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """``script`` run with ``args`` and the read end of a pipe, past its first line (which is given); the process
    and the pipe's write end."""
    r, w = os.pipe()
    argv = [sys.executable, "-c", script, *args, str(r)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, pass_fds=(r,))
    os.close(r)
    try:
        assert proc.stdout is not None
        yield proc, w, proc.stdout.readline()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        os.close(w)


@pytest.fixture
def waiting(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """A process waiting in ``read`` on a pipe, with a file mapped shared three times; the pipe's write end."""
    mapped = tmp_path / "mapped.bin"
    mapped.write_bytes(bytes(range(256)) * 64)  # four pages
    with _started(WAITER, str(mapped)) as (proc, w, first):
        assert first == "ready\n"
        yield proc, w, mapped


def _seize(pid: int) -> ptrace_calls.Tracee:
    return ptrace_calls.Tracee.seize(pid, lambda regs: regs.orig_rax == ptrace_calls.NR["read"])


def test_calls_made_as_one_program_answer_each_and_the_process_goes_on(
    waiting: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, w, _ = waiting
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)
    # The last call's argument is the second's result: the descriptor it made, closed.
    calls: list[ptrace_calls.Call] = [("close", (999,)), ("dup3", (1, 57, 0)), ("close", (ptrace_calls.Earlier(1),))]
    got = tracee.run(page, page + 2 * mmap.PAGESIZE, calls)
    assert got == [-errno.EBADF, 57, 0] and "57" not in os.listdir(f"/proc/{proc.pid}/fd")
    calls = [("dup3", (1, 58, 0)), ("close", (999,)), ("dup3", (ptrace_calls.Earlier(0), 59, 0))]
    assert tracee.run(page, page + 2 * mmap.PAGESIZE, calls) == [58, -errno.EBADF, 59]
    assert tracee.checked("munmap", page, 4 * mmap.PAGESIZE) == 0
    tracee.release(stopped=False)
    os.write(w, b"cell")  # its wait, made again as it goes on, reads what comes
    assert proc.stdout is not None and proc.stdout.readline() == "read cell\n"
    assert proc.wait(10) == 0


def test_a_kernel_whose_clones_failed_sets_its_process_limit_back(
    waiting: tuple[subprocess.Popen[str], int, Path],
) -> None:
    # A fork raises the kernel's process limit to its hard one around its clones. Where their program failed
    # before it ran (its limits not yet written), the limit was set back from zeroed memory: to none at all.
    proc, w, _ = waiting
    soft, hard = 64, resource.prlimit(proc.pid, resource.RLIMIT_NPROC)[1]
    resource.prlimit(proc.pid, resource.RLIMIT_NPROC, (soft, hard))  # the session's bound, its hard one high
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)
    resource.prlimit(proc.pid, resource.RLIMIT_NPROC, (hard, hard))  # raised, as the clones' program does first
    kernel_copy._limit_again(tracee, page + 2 * mmap.PAGESIZE, (soft, hard))
    assert resource.prlimit(proc.pid, resource.RLIMIT_NPROC) == (soft, hard)
    tracee.checked("munmap", page, 4 * mmap.PAGESIZE)
    tracee.release(stopped=False)
    os.write(w, b"cell")
    assert proc.stdout is not None and proc.stdout.readline() == "read cell\n"


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


def test_programs_run_in_several_clones_at_once_each_answer_their_own(
    waiting: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, w, _ = waiting
    tracee = _seize(proc.pid)
    page = tracee.checked("mmap", 0, 4 * mmap.PAGESIZE, 7, 0x22, -1, 0)
    results = page + 2 * mmap.PAGESIZE
    seen: list[int] = []

    def event(kind: int) -> None:  # each clone's pid taken as it is made; each seen stopped later
        if kind == ptrace_calls.EVENT_FORK:
            seen.append(tracee.fork_event())

    tracee.run(page, results, [("clone", (17, 0, 0, 0, 0))] * 3, on_event=event)
    children = [ptrace_calls.Tracee.clone_of(tracee, pid) for pid in seen]
    try:
        for child in children:
            child.started()
        programs = [
            (child, page, results, [("dup3", (1, 60 + i, 0)), ("close", (999,))], b"", 0)
            for i, child in enumerate(children[:2])
        ]
        assert ptrace_each.run_each(programs) == [[60, -errno.EBADF], [61, -errno.EBADF]]
        assert "61" not in os.listdir(f"/proc/{children[0].pid}/fd")  # each made its own calls
        assert "61" in os.listdir(f"/proc/{children[1].pid}/fd")
        # One that cannot run its program is told, once every other has run its own to the end.
        kernel_copy._kill(children[2].pid)
        programs = [(child, page, results, [("dup3", (1, 70, 0))], b"", 0) for child in children]
        with pytest.raises(OSError):
            ptrace_each.run_each(programs)
        assert all("70" in os.listdir(f"/proc/{child.pid}/fd") for child in children[:2])
        # One call in each, all at once (a copy's memory given back): each made its own, and one that cannot is
        # told once the others have made theirs.
        calls = [(child, ("dup3", (1, 80 + i, 0))) for i, child in enumerate(children[:2])]
        assert ptrace_each.call_each(calls) == [80, 81]
        assert "81" not in os.listdir(f"/proc/{children[0].pid}/fd")
        assert "81" in os.listdir(f"/proc/{children[1].pid}/fd")
        with pytest.raises(OSError):
            ptrace_each.call_each([(child, ("dup3", (1, 90, 0))) for child in children])
        assert all("90" in os.listdir(f"/proc/{child.pid}/fd") for child in children[:2])
    finally:
        for child in children:
            kernel_copy._kill(child.pid)
    tracee.checked("munmap", page, 4 * mmap.PAGESIZE)
    tracee.release(stopped=False)
    os.write(w, b"y")
    assert proc.stdout is not None and proc.stdout.readline() == "read y\n"


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
        found = copy_mappings.choose(proc.pid, set(), ())
        copy_mappings.find_held(proc.pid, found, run, _mmap(tracee), 1 << 20)
        # The file's three mappings (on a writable file system), whole; the shared memory, only its two pages.
        files = [m for m in found if m.size == 4 * mmap.PAGESIZE and m.prot == mmap.PROT_READ]
        assert len(files) == 3 and all(m.held == [(m.start, m.size)] for m in files), found
        assert all(process_memory.read_memory(proc.pid, m.start, m.size) == mapped.read_bytes() for m in files)
        (big,) = [m for m in found if m.size == 64 << 20]
        assert big.held == [(big.start, mmap.PAGESIZE), (big.start + 10 * mmap.PAGESIZE, mmap.PAGESIZE)]
        assert _rss_kb(proc.pid) - before < 1024  # nothing untouched was made the kernel's memory
        # Three mappings of four pages and two pages: past a copy's memory of 8 pages, no copy is made.
        with pytest.raises(copy_mappings.TooLarge, match="shared mappings"):
            copy_mappings.find_held(proc.pid, copy_mappings.choose(proc.pid, set(), ()), run, _mmap(tracee), 8 << 12)
    finally:
        tracee.checked("munmap", page, 4 * mmap.PAGESIZE)
        tracee.release(stopped=False)
    os.write(w, b"y")
    assert proc.stdout is not None and proc.stdout.readline() == "read y\n"


def _mmap(tracee: ptrace_calls.Tracee) -> Callable[[int], int]:
    return lambda size: tracee.checked("mmap", 0, size, 3, 0x22, -1, 0)


ARMED = """
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fs = ctypes.c_ulong()
libc.syscall(ctypes.c_long(158), ctypes.c_long(0x1003), ctypes.byref(fs))  # arch_prctl(ARCH_GET_FS)
area = fs.value + ctypes.c_long.in_dll(libc, '__rseq_offset').value
cs = mmap.mmap(-1, 4096)  # a critical section far from anything the agent runs: start, 1 byte, abort past it
base = ctypes.addressof(ctypes.c_char.from_buffer(cs))
words = (0, base, 1, base + 64)  # version and flags, start_ip, post_commit_offset, abort_ip
cs[:32] = b''.join(x.to_bytes(8, 'little') for x in words)
print('ready', area, flush=True)
ctypes.c_uint64.from_address(area + 8).value = base  # armed, as a program in a sequence would have it
got = os.read(int(sys.argv[-1]), 16)
print('read', got.decode(), flush=True)
"""


def test_a_restartable_sequence_armed_by_the_program_is_cleared_before_the_agent_runs_anything() -> None:
    # Armed over the agent's programs, the kernel would send the process to the program's own code as it goes on;
    # the agent clears it as it seizes the process (and its copies inherit it cleared).
    libc = ctypes.CDLL(None)
    try:  # the agent's C library is this one: its kernels have an rseq area where it registers one
        registers = ctypes.c_uint.in_dll(libc, "__rseq_size").value > 0
    except ValueError:
        registers = False
    if not registers:
        pytest.skip("this C library registers no restartable sequences area")
    with _started(ARMED) as (proc, w, first):
        words = first.split()
        assert len(words) == 2 and words[0] == "ready", first
        area = int(words[1])
        time.sleep(0.2)  # in its read, the sequence armed
        assert int.from_bytes(process_memory.read_memory(proc.pid, area + 8, 8), "little") != 0
        tracee = _seize(proc.pid)
        assert int.from_bytes(process_memory.read_memory(proc.pid, area + 8, 8), "little") == 0
        tracee.release(stopped=False)
        os.write(w, b"z")
        assert proc.stdout is not None and proc.stdout.readline() == "read z\n"


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_mapped_files_path_is_followed_through_no_link(tmp_path: Path) -> None:
    # The agent (root) looks a session's mapped file up in the session's namespace: a directory a program made a
    # link (to anywhere: its own file, through /proc, a fifo) is never followed, nor the file if it is a link.
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "f")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "g").symlink_to(tmp_path / "real" / "f")
    info = (tmp_path / "real" / "f").stat()
    found = (f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}", info.st_ino)
    point = (str(tmp_path),)
    assert copy_mappings.identity(b"", os.fsencode(tmp_path / "real" / "f"), point) == found
    for other in ("link/f", "real/g", "fifo/f", "real/../real/f", "nothing/f"):
        assert copy_mappings.identity(b"", os.fsencode(tmp_path / other), point) is None, other
    assert copy_mappings.identity(b"", os.fsencode(tmp_path / "real" / "f"), ("/elsewhere",)) is None


class _Group:
    """Stands in for a copy's memory cgroup: the processes in it."""

    def __init__(self, pids: set[int]) -> None:
        self.held = pids

    def pids(self) -> set[int]:
        return self.held


def test_a_copy_is_read_back_in_the_memory_cgroup_made_for_it() -> None:
    nobody = 65534
    proc = subprocess.Popen(["sleep", "30"], user=nobody, group=nobody, extra_groups=[], start_new_session=True)
    try:  # Popen returns once it runs ``sleep``: its ids changed, and no capability left
        given = Target("", "", 0, 0, nobody, cast(Any, _Group({proc.pid})), None, keeps=True)
        copy_making.check(proc.pid, given, {nobody}, set(), ([], ()))
        elsewhere = Target("", "", 0, 0, nobody, cast(Any, _Group({proc.pid + 1})), None, keeps=True)
        with pytest.raises(ptrace_calls.TraceFailed, match="not in the memory cgroup made for it"):
            copy_making.check(proc.pid, elsewhere, {nobody}, set(), ([], ()))
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no interpreter another user may run")
def test_a_copy_mapping_a_file_of_the_sessions_file_systems_is_refused() -> None:
    nobody = 65534
    # Only its five descriptors (its standard streams and two more), in a session of its own, with no capability.
    script = "import os, sys, time\nos.open(os.devnull, os.O_RDONLY)\nos.open(os.devnull, os.O_RDONLY)\n"
    script += "print('ready', flush=True)\ntime.sleep(30)"
    python = os.path.realpath("/usr/bin/python3")  # one that user may run
    proc = subprocess.Popen(
        [python, "-c", script],
        user=nobody,
        group=nobody,
        extra_groups=[],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        copy = Target("", "", 0, 0, (nobody, nobody), cast(Any, _Group({proc.pid})), None)
        copy_making.check(proc.pid, copy, {nobody}, {"ff:ff"}, ([], ()))
        # It maps its interpreter: were that file the session's, the copy would share it.
        interpreter = copy_mappings.device(os.stat(python).st_dev)
        with pytest.raises(ptrace_calls.TraceFailed, match="maps a file of the session it was copied from"):
            copy_making.check(proc.pid, copy, {nobody}, {interpreter}, ([], ()))
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
