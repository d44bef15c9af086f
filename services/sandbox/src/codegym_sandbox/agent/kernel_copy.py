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
  agent, made in it and taken by the agent (nothing the kernel holds is trusted). A mapping of a file of the
  parent's is made one of its own copy of that file; every other shared mapping a private one with the same
  contents (``copy_mappings.py``). Its scratch directory and
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

import _thread
import collections
import contextlib
import os
import resource
import stat
import struct
from collections.abc import Callable

from . import copy_files, copy_making, copy_mappings, copy_tree, linux
from .copy_files import Mounts, Target
from .copy_making import Copy
from .process_memory import write_memory
from .ptrace_calls import EVENT_FORK, NR, Call, Tracee, TraceFailed
from .session_main import REQUESTS_FD

# A user namespace (its ids), a mount namespace (its files), a network namespace (its ports). Its box's IPC and
# UTS namespaces it shares (no program may make System V or POSIX IPC objects, or change the host name), and its
# pid namespace: the first process of a namespace of its own would ignore its own signals.
CLONE_FLAGS = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWNET
_SIGCHLD = 17
_PAGE = 4096
_CODE = copy_making.CODE  # room for the programs a kernel is copied and its copies made over with
_MOST = 100  # copies made at once: their clones' program (72 bytes each) fits in ``_CODE``
_LIMITS = _CODE + 1024  # the process limits the clones' program sets, past its results (8 bytes a call)
_WALL = 0x40000000


class Refused(Exception):
    """The kernel cannot be copied now, and goes on as it was; the reason is its client's to read."""


class Lost(RuntimeError):
    """The kernel ended as it was to be copied (one that would not stop is killed): the session is over, which a
    refusal would not say."""


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
        if not _alive(kernel):
            raise Lost(f"the session's interpreter ended as it was held for a copy: {exc.strerror or exc}") from exc
        raise Refused(f"the session's interpreter cannot be held for a copy: {exc.strerror or exc}") from exc
    children: list[Tracee] = []
    copies: list[Copy] = []
    helper: copy_files.Helper | None = None
    size = page = 0
    try:
        check_alone(kernel, others)  # again, now that it is stopped: nothing of it can start anything more
        cwd = _working_directory(kernel, (mounts.scratch, mounts.shm)) + b"\0"
        status = copy_making.status_of(kernel)
        kernel_ids = copy_making.ids(status)
        # Its files' file systems: a copy maps nothing of them (its own are copies).
        points = (mounts.scratch, mounts.shm)
        writable = {copy_mappings.device(os.stat(f"/proc/{kernel}/root{point}").st_dev) for point in points}
        # What no copy may share: found once, for every copy.
        mappings = copy_mappings.choose(kernel, writable, points)
        # Memory for the programs the copies are made with, and their arguments: each copy has its own (private).
        size = copy_making.room(cwd, mappings)
        page = parent.checked("mmap", 0, size, 7, 0x22, -1, 0)
        # A user namespace counts its processes against its maker's user too, up to the process limit its
        # maker had as it was made: made under the session's, every copy's processes would share one count with
        # its siblings (a fork bomb in one would leave the others none). Made under the hard limit (high, and no
        # program's to change: linux.py), each copy counts its own, under the session's limit, which each sets
        # again as it is made over (copy_making.py). The kernel raises its own and sets it back around its clones:
        # no process of the agent's takes the kernel's user's ids to set another's.
        limit = _process_limit_of(kernel)
        limited, raised = page + _LIMITS, True
        try:
            # And, where there are such mappings, a plain clone to read them through: reading the kernel's own
            # would put the pages it holds only in a file's cache into its page table, its memory from then on.
            _clones(parent, targets, bool(mappings), (page, limited), limit, children)
            raised = False
        finally:
            if raised:
                _limit_again(parent, limited, limit)
        copy_mappings.check_carried(kernel, children[0].pid)
        reader = children[len(targets)] if mappings else None
        if reader is not None:  # which pages the kernel holds in them, asked in the reader (mincore)
            _find_held(reader, mappings, page, memory_bytes)
        made = list(zip(children[: len(targets)], targets, strict=True))
        helper = copy_files.start(made, kernel, mounts)  # their files, made as they are made over
        copies = copy_making.make_over(made, cwd, mappings, (page, size), helper, limit)
        for copy, target in zip(copies, targets, strict=True):
            copy_making.check(copy.pid, target, kernel_ids, writable, (mappings, (mounts.scratch, mounts.shm)))
            if _process_limit_of(copy.pid) != limit:
                raise TraceFailed(0, f"process {copy.pid} did not take the session's process limit")
        if reader is not None:
            copy_mappings.fill(reader.pid, [child.pid for child, target in made if not target.keeps], mappings)
            _end_children(parent, [reader])
            children.remove(reader)
    except BaseException as exc:
        try:
            if helper is not None:
                helper.stop()
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
        # A refusal says the session goes on: not where its kernel is gone (killed, as one that would not stop is).
        if not _alive(kernel):
            raise Lost(f"the session's interpreter ended as it was to be copied: {exc}") from exc
        # A ValueError: a name or directory that is no text, say (what the session holds is its own to name).
        refusals = (Refused, OSError, ValueError, copy_tree.TooMany, copy_mappings.TooLarge, copy_mappings.Uncopyable)
        if isinstance(exc, refusals):
            raise Refused(f"the session could not be copied: {exc}") from exc
        raise
    for child in children:
        child.release(stopped=True)
    return copies, parent


def _alive(pid: int) -> bool:
    """Whether process ``pid`` is still there, not ended (a zombie's state is Z, one being reaped X)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X", b"x")


def _process_limit_of(pid: int) -> tuple[int, int]:
    """``pid``'s process limit, as ``/proc`` shows it to anyone (``prlimit`` asks what setting it would)."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max processes"):
                soft, hard = line.split()[2:4]
                return tuple(resource.RLIM_INFINITY if v == "unlimited" else int(v) for v in (soft, hard))  # type: ignore[return-value]
    raise OSError(f"no process limit of process {pid} to read")


def _limit_again(parent: Tracee, limited: int, limit: tuple[int, int]) -> None:
    """Have the kernel set its process limit back to ``limit``, where its clones' program did not get to it (given
    at ``limited`` again: that program may have failed before its own was written); a kernel that cannot is
    killed: it would go on under its hard limit."""
    with contextlib.suppress(OSError):
        write_memory(parent.pid, limited, struct.pack("<2q", *limit))
        if parent.call("prlimit64", 0, linux.RLIMIT_NPROC, limited, 0) == 0:
            return
    with contextlib.suppress(OSError):
        os.kill(parent.pid, 9)


def _working_directory(kernel: int, points: tuple[str, ...]) -> bytes:
    """The kernel's working directory, as its copies enter theirs: its path, where that path (walked with no link
    followed, in the session's own files) is the directory; a deleted one (its name a program may have made
    anything) is refused."""
    path = os.readlink(f"/proc/{kernel}/cwd".encode())
    if not any(path.startswith(os.fsencode(point) + b"/") for point in points):
        return path  # a mount point itself, or a directory no program can make a link in (the box's root)
    info = os.stat(f"/proc/{kernel}/cwd")
    found = copy_mappings.identity(b"/proc/%d/root" % kernel, path, points, stat.S_IFDIR)
    if found != (copy_mappings.device(info.st_dev), info.st_ino):
        raise Refused("the session's working directory was deleted: no copy could be in it")
    return path


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
    capability in its copies'. Its copies go to its box (the reaper of their namespace). Killed, stopped under
    this process's trace, it runs nothing of its own again (a SIGKILL is not stopped for); its end is taken by
    :func:`reap`, once the fork's answer is sent (it frees the kernel's memory, which the answer need not wait
    for)."""
    with contextlib.suppress(OSError):
        os.kill(parent.pid, 9)


def reap(parent: Tracee) -> None:
    """Take the end of a kernel :func:`end` killed: its tracer is told of it first, and until it takes it, the
    kernel's box cannot."""
    _kill(parent.pid)


def _clones(
    parent: Tracee,
    targets: list[Target],
    reader: bool,
    memory: tuple[int, int],
    limit: tuple[int, int],
    into: list[Tracee],
) -> None:
    """A copy of ``parent`` for each of ``targets`` (and, with ``reader``, a plain clone after them, in its
    namespaces), each stopped before its first instruction and put in its target's cgroups, into ``into`` as
    each is seen: its clones are made as one program (each copy starts in it, and is pointed back at the
    parent's wait), between two calls that raise the parent's process limit (``limit``: soft and hard) to its hard
    one and set it back, given at ``memory``'s second address (the first: where the program is written)."""
    page, limited = memory
    soft, hard = limit
    placer = _Placer(targets)
    seen: list[int] = []

    def event(kind: int) -> None:
        if kind == EVENT_FORK:  # its pid as the agent sees it (the kernel's own is of the box's pid namespace)
            pid = parent.fork_event()
            placer.put((len(seen), pid))
            seen.append(pid)

    clones: list[Call] = [("clone", (CLONE_FLAGS | _SIGCHLD, 0, 0, 0, 0))] * len(targets)
    clones += [("clone", (_SIGCHLD, 0, 0, 0, 0))] if reader else []
    raising: Call = ("prlimit64", (0, linux.RLIMIT_NPROC, limited, 0))
    lowering: Call = ("prlimit64", (0, linux.RLIMIT_NPROC, limited + 16, 0))
    given = struct.pack("<4q", hard, hard, soft, hard)
    try:
        made = parent.run(page, page + _CODE, [raising, *clones, lowering], given, limited, on_event=event)
    finally:
        # Each is its caller's to end from now on, whatever happens: it was made, and holds the kernel's memory.
        into.extend(Tracee.clone_of(parent, pid) for pid in seen)
        placer.join()
    if min(made[0], made[-1]) < 0:
        failed = -min(made[0], made[-1])
        raise TraceFailed(failed, f"the interpreter's process limit could not be set: {os.strerror(failed)}")
    for result in made[1:-1]:
        if result < 0:
            raise TraceFailed(-result, f"the interpreter could not be copied: {os.strerror(-result)}")
    if len(into) != len(clones):
        raise TraceFailed(0, "the interpreter's copies were not all seen starting")
    for child in into:  # seen once the kernel went on: each started as the kernel made the next
        child.started()


class _Placer:
    """Puts each copy in its target's cgroups as it is made (what it holds from then on, the pages it is given
    too, is its own), from a thread of its own. The first move of a process from one cgroup to another waits
    for a grace period of the kernel's (some milliseconds, while the kernel makes every later move cheap):
    made here, the clones that follow go on meanwhile. A thread of ``_thread``'s, built in: every byte an agent
    loads is in its runs' memory (a container's agent's, or pages its children write), and ``threading`` is not
    loaded for this."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self.items: collections.deque[tuple[int, int] | None] = collections.deque()
        self.failed: OSError | None = None
        self.waiting, self.ended = _thread.allocate_lock(), _thread.allocate_lock()
        self.waiting.acquire()  # released after each item is put: the thread drains what is there
        self.ended.acquire()  # released as the thread ends
        _thread.start_new_thread(self._place, ())

    def put(self, item: tuple[int, int] | None) -> None:
        self.items.append(item)
        with contextlib.suppress(RuntimeError):  # released already: the thread drains this one too
            self.waiting.release()

    def _place(self) -> None:
        try:
            while True:
                self.waiting.acquire()
                while self.items:
                    item = self.items.popleft()
                    if item is None:
                        return
                    self._one(*item)
        finally:
            self.ended.release()

    def _one(self, index: int, pid: int) -> None:
        if index >= len(self.targets) or self.failed is not None:
            return  # a reader stays where the kernel is
        target = self.targets[index]
        try:
            for group in (target.memory, target.meter, target.pids):
                if group is not None:
                    group.add(pid)
        except OSError as exc:
            self.failed = exc

    def join(self) -> None:
        """Once every copy seen is placed: a copy that could not be is raised."""
        self.put(None)
        self.ended.acquire()
        if self.failed is not None:
            raise self.failed


def _inner_pid(pid: int) -> int:
    """``pid``'s number in its own pid namespace (its parent's), or 0 where it is gone."""
    try:
        return int(copy_making.status_of(pid)["NSpid"].split()[-1])
    except (OSError, KeyError, ValueError, IndexError):
        return 0


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
