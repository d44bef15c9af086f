"""Copies of a session's kernel: a fork that is as isolated from its parent and its siblings as two sessions are.

A kernel's state is its process's memory, which only the kernel's own ``fork`` copies exactly (random state,
objects, everything a cell left). But a fork shares its parent's user, namespaces, session and open files: it
could signal its siblings, write their files, or meet them in a pipe, a terminal or a shared mapping they all
inherited. So the copy is made by the agent, as the kernel's tracer (``ptrace_calls.py``), while the kernel
waits between cells, and each copy is made over before any instruction of it runs:

* **Namespaces and a host user of its own.** The kernel clones itself into a new user, mount and network
  namespace (the seccomp filter lets a namespace through only to a process its tracer lets through: the
  agent's). The agent maps the copy's program uid to a host user no other session has (the copy that continues
  the session keeps the session's), sets its ids, gives it a process session of its own and takes every
  capability the new namespace gave it, before it runs. It stays in its box's pid namespace, where a process's
  own signals act on it as on any process (the first process of a namespace ignores them), and is the reaper of
  what it starts (its orphans stay under it, to be stopped and ended with it).
* **Nothing shared.** Every descriptor it inherited is closed; it gets new standard streams and channels to the
  agent, made in it and taken by the agent (nothing the kernel holds is trusted). Every shared mapping, and every
  mapping of a file of the parent's, is made a private one with the same contents. Its scratch directory and
  ``/dev/shm`` are new tmpfs mounts holding a copy of the parent's files, owned by its user, and it has a devpts
  instance of its own.
* **The parent is gone.** The copies' user namespaces belong to the parent's host user: a process of that user
  left in the worker's namespace would hold every capability in them. So the parent is killed once its copies
  are made: a copy made at the same time takes its place as the session's kernel (:func:`copy_kernel`'s first
  target).

A kernel is copied only as it waits for its next cell, alone: one thread, no other process (a copy holds one
thread of one process; anything else of the session would be lost, or left to the copies to share). What cannot
be copied (a file system too large to copy, a process limit reached) is refused, and the session goes on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import socket
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass

from . import copy_files, copy_mappings, linux
from .copy_files import Mounts, Target
from .ptrace_calls import EVENT_FORK, NR, Call, Tracee, TraceFailed, read_memory, wait_stop
from .session_main import ANSWERS_FD, REQUESTS_FD

# A user namespace (its ids), a mount namespace (its files), a network namespace (its ports). Its box's IPC and
# UTS namespaces it shares (no program may make System V or POSIX IPC objects, or change the host name), and its
# pid namespace: the first process of a namespace of its own would ignore its own signals.
CLONE_FLAGS = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWNET
_SIGCHLD = 17
_CAP_VERSION_3 = 0x20080522
_PAGE = 4096
_CODE = 2 * _PAGE  # room for the programs a kernel is copied and its copies made over with (``Tracee.run``)
_MOST = 100  # copies made at once: their clones' program (72 bytes each) fits in ``_CODE``
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_F_DUPFD_CLOEXEC = 1030
_O_CLOEXEC = 0o2000000
_AT_FDCWD = -100
_PIDFD_GETFD = 438
_WALL = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Refused(Exception):
    """The kernel cannot be copied now; the reason is its client's to read."""


@dataclass
class Copy:
    """A copy, running (stopped until its first cell), and the agent's ends of its channels."""

    pid: int
    requests: int
    stdout: int
    stderr: int
    answers: socket.socket

    def close(self) -> None:
        for fd in (self.requests, self.stdout, self.stderr):
            os.close(fd)
        self.answers.close()


def check_alone(kernel: int, others: Callable[[], set[int]]) -> None:
    """Refuse a kernel that is not a single thread with no other process of its session (``others``). A process
    of the kernel's user left beside it would hold every capability in its copies' user namespaces, which that
    user owns: it must not be there."""
    threads = os.listdir(f"/proc/{kernel}/task")
    if len(threads) != 1:
        raise Refused(f"the session runs {len(threads) - 1} thread(s) beside its interpreter: a copy would lack them")
    if others():
        raise Refused("the session runs other processes beside its interpreter: a copy would lack them")


def copy_kernel(
    kernel: int, others: Callable[[], set[int]], targets: list[Target], mounts: Mounts, memory_bytes: int
) -> tuple[list[Copy], Tracee]:
    """Copies of ``kernel`` (waiting for a cell on its requests pipe; ``others`` the other processes of its
    session), one per target, each stopped until it is continued; and ``kernel``, stopped under this process's
    trace, for its caller to end (:func:`end`) once nothing would take its end for its copies' (:class:`Refused`,
    and ``kernel`` as it was, where they cannot be made). ``memory_bytes``: the memory each copy may hold."""
    if len(targets) > _MOST:
        raise Refused(f"a kernel is copied at most {_MOST} times at once")
    check_alone(kernel, others)
    try:
        parent = Tracee.seize(kernel, lambda regs: regs.orig_rax == NR["read"] and regs.rdi == REQUESTS_FD)
    except TraceFailed as exc:
        raise Refused(f"the session's interpreter cannot be held for a copy: {exc}") from exc
    children: list[Tracee] = []
    copies: list[Copy] = []
    size = page = 0
    try:
        check_alone(kernel, others)  # again, now that it is stopped: nothing of it can start anything more
        cwd = os.readlink(f"/proc/{kernel}/cwd").encode() + b"\0"
        kernel_ids = _ids(_status(kernel))
        # Its files' file systems: a copy maps nothing of them (its own are copies).
        writable = {_device(f"/proc/{kernel}/root{point}") for point in (mounts.scratch, mounts.shm)}
        # Memory for the programs the copies are made with, and their arguments: each copy has its own (private).
        size = _CODE + (len(cwd) + len(mounts.scratch) + 2 * _PAGE) // _PAGE * _PAGE
        page = parent.checked("mmap", 0, size, 7, 0x22, -1, 0)
        # What no copy may share: found once, for every copy.
        mappings = copy_mappings.choose(kernel, writable)
        # A user namespace counts its processes against its maker's user too, up to the process limit its
        # maker had as it was made: made under the session's, every copy's processes would share one count with
        # its siblings (a fork bomb in one would leave the others none). Made under the hard limit (high, and no
        # program's to change: linux.py), each copy counts its own, under the session's limit, set again below.
        soft, hard = resource.prlimit(kernel, resource.RLIMIT_NPROC)
        try:
            resource.prlimit(kernel, resource.RLIMIT_NPROC, (hard, hard))
            # And, where there are such mappings, a plain clone to read them through: reading the kernel's own
            # would put the pages it holds only in a file's cache into its page table, its memory from then on.
            _clones(parent, len(targets), bool(mappings), page, children)
        finally:
            resource.prlimit(kernel, resource.RLIMIT_NPROC, (soft, hard))
        reader = children[len(targets)] if mappings else None
        if reader is not None:  # which pages the kernel holds in them, asked in the reader (mincore)
            _find_held(reader, mappings, page, memory_bytes)
        made = list(zip(children[: len(targets)], targets, strict=True))
        for child, target in made:
            resource.prlimit(child.pid, resource.RLIMIT_NPROC, (soft, hard))
            for group in (target.memory, target.meter):  # what it holds from now on (pages it copies too) is its own
                if group is not None:
                    group.add(child.pid)
        copy_files.prepare(made, kernel, mounts)
        for child, target in made:
            copies.append(_make_over(child, target, cwd, mounts.scratch, mappings, (page, size)))
            _check(child.pid, target, kernel_ids)
        if reader is not None:
            copy_mappings.fill(reader.pid, [child.pid for child, target in made if not target.keeps], mappings)
            _end_children(parent, [reader])
            children.remove(reader)
    except BaseException as exc:
        try:
            _end_children(parent, children)
            for copy in copies:
                copy.close()
            if page:
                parent.call("munmap", page, size)
        finally:
            # The session goes on as it was; and whatever happened, its kernel is no longer traced (its end would
            # wait for this process to take it).
            with contextlib.suppress(OSError):
                parent.release(stopped=True)
        if isinstance(exc, Refused | TraceFailed | OSError | copy_files.TooMany | copy_mappings.TooLarge):
            raise Refused(f"the session could not be copied: {exc}") from exc
        raise
    for child in children:
        child.release(stopped=True)
    return copies, parent


def _find_held(reader: Tracee, mappings: list[copy_mappings.Mapping], page: int, most: int) -> None:
    copy_mappings.find_held(
        reader.pid,
        mappings,
        lambda calls: reader.run(page, page + _CODE, calls),
        lambda size: reader.checked("mmap", 0, size, 3, 0x22, -1, 0),
        most,
    )


def _end_children(parent: Tracee, children: list[Tracee]) -> None:
    """Kill clones of ``parent`` (copies, a reader), and have it take their ends: it is their parent, and they
    would stay its zombies (a session with them runs other processes, and is copied no more)."""
    inner = [_inner_pid(child.pid) for child in children]
    for child in children:
        _kill(child.pid)
    for pid in inner:
        if pid:
            parent.call("wait4", pid, 0, _WALL, 0)


def end(parent: Tracee) -> None:
    """Kill a kernel once copied: its user has no process left in its namespace, where it would hold every
    capability in its copies'. Its copies go to its box (the reaper of their namespace)."""
    _kill(parent.pid)


def _device(path: str) -> str:
    """The device of the file system at ``path``, as ``/proc/PID/maps`` writes it."""
    dev = os.stat(path).st_dev
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"


def _clones(parent: Tracee, n: int, reader: bool, page: int, into: list[Tracee]) -> None:
    """``n`` copies of ``parent`` (and, with ``reader``, a plain clone after them, in its namespaces), each stopped
    before its first instruction, into ``into`` as each is seen: its clones are made as one program (each copy
    starts in it, and is pointed back at the parent's wait)."""

    def event(kind: int) -> None:
        if kind == EVENT_FORK:  # its pid as the agent sees it (the kernel's own is of the box's pid namespace)
            pid = parent.fork_event()
            wait_stop(pid)  # stopped before its first instruction
            into.append(Tracee(pid, parent.saved))

    calls: list[Call] = [("clone", (CLONE_FLAGS | _SIGCHLD, 0, 0, 0, 0))] * n
    calls += [("clone", (_SIGCHLD, 0, 0, 0, 0))] if reader else []
    made = parent.run(page, page + _CODE, calls, on_event=event)
    for result in made:
        if result < 0:
            raise TraceFailed(-result, f"the interpreter could not be copied: {os.strerror(-result)}")
    if len(into) != len(calls):
        raise TraceFailed(0, "the interpreter's copies were not all seen starting")


def _make_over(
    child: Tracee,
    target: Target,
    cwd: bytes,
    scratch: str,
    mappings: list[copy_mappings.Mapping],
    memory: tuple[int, int],
) -> Copy:
    """Give the copy its channels, its working directory, a session of its own and its ids, and nothing it shares,
    before it runs. Its ids last: a process whose ids changed is no longer dumpable, and its memory is not the
    agent's to write. The calls are made as a few programs in ``memory`` (its own: its parent's, copied), which
    it then gives back."""
    pid = child.pid
    page, size = memory
    results = page + _CODE
    pairs, caps, null, home, path = results + 512, results + 576, results + 640, results + 768, results + _PAGE
    data = bytearray(_PAGE - 512)
    data[64:96] = struct.pack("<Ii", _CAP_VERSION_3, 0) + bytes(24)  # no capability at all
    data[128 : 128 + len(os.devnull) + 1] = os.devnull.encode() + b"\0"
    data[256 : 256 + len(scratch) + 1] = scratch.encode() + b"\0"

    def run(calls: list[Call], checked: int, written: bytes = b"") -> list[int]:
        assert len(calls) <= 64  # a result each in the 512 bytes before ``pairs``
        got = child.run(page, results, calls, written, pairs)
        for (name, _), result in zip(calls[:checked], got, strict=False):
            if result < 0:
                raise TraceFailed(-result, f"{name} in process {pid}: {os.strerror(-result)}")
        return got

    if not target.keeps:
        copy_mappings.make(run, mappings)  # what they hold is written once every copy has them (fill)
    # Its own channels, made in it (its pipes and socket pair); the agent takes its ends out of the copy by the
    # copy's pidfd. Nothing the kernel holds (whatever a cell left at its descriptors) is asked for or trusted.
    made: list[Call] = [] if target.keeps else [("close_range", (ANSWERS_FD + 1, 0xFFFFFFFF, 0))]
    made += [("pipe2", (pairs + 8 * i, _O_CLOEXEC)) for i in range(3)]
    made += [("socketpair", (socket.AF_UNIX, socket.SOCK_STREAM | _O_CLOEXEC, 0, pairs + 24))]
    made += [("openat", (_AT_FDCWD, null, os.O_RDONLY | _O_CLOEXEC)), ("chdir", (path,))]
    got = run(made, len(made) - 1, bytes(data) + cwd)
    # One it cannot enter: its own scratch directory, never the parent's.
    enter = [("chdir", (home,))] if got[-1] < 0 else []
    ends = struct.unpack("<8i", read_memory(pid, pairs, 32))
    requests_r, requests_w, out_r, out_w, err_r, err_w, answers_ours, answers_theirs = ends
    theirs = [got[-2], out_w, err_w, requests_r, answers_theirs]
    pidfd = os.pidfd_open(pid)
    try:
        taken = [_take(pidfd, fd) for fd in (requests_w, out_r, err_r, answers_ours)]
    finally:
        os.close(pidfd)
    closes: list[Call] = [("close", (fd,)) for fd in (requests_w, out_r, err_r, answers_ours)]
    low = [fd for fd in theirs if fd <= ANSWERS_FD]
    if low:  # in a place the kernel had closed: moved past the five, where no dup3 lands
        moves: list[Call] = [("fcntl", (fd, _F_DUPFD_CLOEXEC, ANSWERS_FD + 1)) for fd in low]
        moved = dict(zip(low, run(moves, len(low)), strict=True))
        closes += [("close", (fd,)) for fd in low]
        theirs = [moved.get(fd, fd) for fd in theirs]
    for number, fd in enumerate(theirs):
        closes += [("dup3", (fd, number, _O_CLOEXEC if number in (REQUESTS_FD, ANSWERS_FD) else 0)), ("close", (fd,))]
    # A session of its own: nothing of its parent's (a terminal, a process group the kernel may signal as a
    # whole, an orphaned group's SIGCONT) reaches it. Its orphans stay its own (a subreaper). Then its ids, and
    # every capability its namespace gave it taken. Dumpable again, as the kernel was (a change of ids clears
    # it): its tracer for a fork of it is the agent, whose capabilities are in the worker's namespace, not in
    # that of the memory it inherited (the server's: a session's kernel is forked from the agent's process, not
    # executed), where a process not dumpable would ask.
    closes += [*enter, ("setsid", ()), ("prctl", (_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))]
    closes += [("setresgid", (target.gid,) * 3), ("setresuid", (target.uid,) * 3), ("capset", (caps, caps + 8))]
    closes += [("prctl", (_PR_SET_DUMPABLE, 1, 0, 0, 0))]
    requests, stdout, stderr, answers_fd = taken
    # What was taken is what was made (pipes and a socket), whatever the copy's memory said their numbers were:
    # never a file of its own (the agent, root, changes the modes of these).
    kinds = [stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (requests, stdout, stderr)]
    if not all(kinds) or not stat.S_ISSOCK(os.fstat(answers_fd).st_mode):
        for fd in taken:
            os.close(fd)
        raise TraceFailed(0, f"process {pid} did not make the channels it was asked to")
    for fd, mode in ((requests, 0o444), (stdout, 0o222), (stderr, 0o222)):
        os.fchmod(fd, mode)  # the mode the box gives a kernel's channels: none opens again by path
    answers = socket.socket(fileno=answers_fd)
    answers.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before it can write
    run(closes, len(closes))
    child.checked("munmap", page, size)
    return Copy(pid, requests, stdout, stderr, answers)


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def _ids(status: dict[str, str]) -> set[int]:
    """Every uid and gid of a process, as the agent sees them."""
    return {int(x) for x in status["Uid"].split() + status["Gid"].split()}


def _check(pid: int, target: Target, kernel_ids: set[int]) -> None:
    """What the copy was made into, read back from outside it, not taken from its calls' answers: its ids (the
    kernel's, ``kernel_ids``, for the session's continuation), no capability, a process session of its own, and
    only its five descriptors (the continuation keeps its own)."""
    status = _status(pid)
    caps = [int(status[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")]
    if _ids(status) != (kernel_ids if target.keeps else {target.owner}) or any(caps) or os.getsid(pid) != pid:
        raise TraceFailed(0, f"process {pid} was not made what it was asked to be")
    if not target.keeps and sorted(os.listdir(f"/proc/{pid}/fd")) != ["0", "1", "2", "3", "4"]:
        raise TraceFailed(0, f"process {pid} holds descriptors it was not given")


def _inner_pid(pid: int) -> int:
    """``pid``'s number in its own pid namespace (its parent's), or 0 where it is gone."""
    try:
        return int(_status(pid)["NSpid"].split()[-1])
    except (OSError, KeyError, ValueError, IndexError):
        return 0


def _take(pidfd: int, fd: int) -> int:
    """Descriptor ``fd`` of the process of ``pidfd``, duplicated here (``pidfd_getfd``)."""
    got = int(_libc.syscall(_PIDFD_GETFD, pidfd, fd, 0))
    if got < 0:
        err = ctypes.get_errno()
        raise TraceFailed(err, f"a copy's channel could not be taken: {os.strerror(err)}")
    os.set_inheritable(got, False)
    return got


def _kill(pid: int) -> None:
    """Kill a copy still traced, and reap it: the tracer is told of its end first, and until it takes it, the
    copy's namespaces (and the box's, where it is one of its processes) cannot end."""
    try:
        os.kill(pid, 9)
        while True:
            _, status = os.waitpid(pid, _WALL)
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                break
    except OSError:
        pass
