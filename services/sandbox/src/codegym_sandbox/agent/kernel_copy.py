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

import ctypes
import os
import resource
import shutil
import socket
import stat
import struct
from dataclasses import dataclass

from . import linux, session_pause
from .memory_cgroup import MemoryCgroup
from .ptrace_calls import EVENT_FORK, NR, Tracee, TraceFailed, read_memory, wait_stop, write_memory
from .run_cgroup import RunCgroup
from .session_main import ANSWERS_FD, REQUESTS_FD

# A user namespace (its ids), a mount namespace (its files), a network namespace (its ports). Its box's IPC and
# UTS namespaces it shares (no program may make System V or POSIX IPC objects, or change the host name), and its
# pid namespace: the first process of a namespace of its own would ignore its own signals.
CLONE_FLAGS = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWNET
_SIGCHLD = 17
_CAP_VERSION_3 = 0x20080522
_MAP_PRIVATE_ANONYMOUS_FIXED = 0x02 | 0x20 | 0x10
_PAGE = 4096
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_MAX_FILES = 10_000  # files and directories a copy may be given (copying them is the agent's time)
_F_DUPFD_CLOEXEC = 1030
_O_CLOEXEC = 0o2000000
_AT_FDCWD = -100
_PIDFD_GETFD = 438
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Refused(Exception):
    """The kernel cannot be copied now; the reason is its client's to read."""


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
    # but the kernel it continues (stopped for good); every other copy gets its own.
    keeps: bool = False


@dataclass
class Copy:
    """A copy, running (stopped until its first cell), and the agent's ends of its channels."""

    pid: int
    requests: int
    stdout: int
    stderr: int
    answers: socket.socket


@dataclass
class Mounts:
    """Where a kernel's files are, and how the copies' own mounts are made."""

    scratch: str
    scratch_options: str  # tmpfs options, less the owner (each copy's own)
    shm: str
    shm_options: str
    devpts_options: str


def check_alone(kernel: int, root: int) -> None:
    """Refuse a kernel that is not a single thread with no other process of its session (every process under
    ``root``, where its orphans go). A process of the kernel's user left beside it would hold every capability
    in its copies' user namespaces, which that user owns: it must not be there."""
    threads = os.listdir(f"/proc/{kernel}/task")
    if len(threads) != 1:
        raise Refused(f"the session runs {len(threads) - 1} thread(s) beside its interpreter: a copy would lack them")
    if session_pause.descendants(root) - {kernel}:
        raise Refused("the session runs other processes beside its interpreter: a copy would lack them")


def copy_kernel(kernel: int, root: int, targets: list[Target], mounts: Mounts) -> list[Copy]:
    """Copies of ``kernel`` (waiting for a cell on its requests pipe; ``root`` the process its session's orphans go
    to), one per target, each stopped until it is continued; ``kernel`` is killed (:class:`Refused`, and
    ``kernel`` as it was, where they cannot be made)."""
    check_alone(kernel, root)
    try:
        parent = Tracee.seize(kernel, lambda regs: regs.orig_rax == NR["read"] and regs.rdi == REQUESTS_FD)
    except TraceFailed as exc:
        raise Refused("the session's interpreter is not waiting for a cell") from exc
    made: list[tuple[Tracee, Target]] = []
    try:
        check_alone(kernel, root)  # again, now that it is stopped: nothing of it can start anything more
        cwd = os.readlink(f"/proc/{kernel}/cwd").encode() + b"\0"
        # Its files' file systems: a copy maps nothing of them (its own are copies).
        writable = {_device(f"/proc/{kernel}/root{point}") for point in (mounts.scratch, mounts.shm)}
        # A user namespace counts its processes against its maker's user too, up to the process limit its
        # maker had as it was made: made under the session's, every copy's processes would share one count with
        # its siblings (a fork bomb in one would leave the others none). Made under the hard limit (high, and no
        # program's to change: linux.py), each copy counts its own, under the session's limit, set again below.
        soft, hard = resource.prlimit(kernel, resource.RLIMIT_NPROC)
        try:
            resource.prlimit(kernel, resource.RLIMIT_NPROC, (hard, hard))
            for target in targets:
                made.append((_clone(parent), target))
        finally:
            resource.prlimit(kernel, resource.RLIMIT_NPROC, (soft, hard))
        for child, target in made:
            resource.prlimit(child.pid, resource.RLIMIT_NPROC, (soft, hard))
            for group in (target.memory, target.meter):  # what it holds from now on (pages it copies too) is its own
                if group is not None:
                    group.add(child.pid)
        _prepare(made, kernel, mounts)
        copies = [_make_over(child, target, cwd, mounts.scratch, writable) for child, target in made]
    except BaseException as exc:
        for child, _ in made:
            _kill(child.pid)
        parent.release(stopped=True)  # the session goes on as it was
        if isinstance(exc, Refused | TraceFailed | OSError):
            raise Refused(f"the session could not be copied: {exc}") from exc
        raise
    for child, _ in made:
        child.release(stopped=True)
    _kill(kernel)  # its copies are its children no more (its box's, stopped); its user has no process left here
    return copies


def _device(path: str) -> str:
    """The device of the file system at ``path``, as ``/proc/PID/maps`` writes it."""
    dev = os.stat(path).st_dev
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"


def _clone(parent: Tracee) -> Tracee:
    children: list[int] = []

    def event(kind: int) -> None:
        if kind == EVENT_FORK:
            children.append(parent.fork_event())

    made = parent.call("clone", CLONE_FLAGS | _SIGCHLD, 0, 0, 0, 0, on_event=event)
    if made < 0:
        raise TraceFailed(-made, f"the interpreter could not be copied: {os.strerror(-made)}")
    if len(children) != 1:  # its pid as the agent sees it (the kernel's own is of the box's pid namespace)
        raise TraceFailed(0, "the interpreter's copy was not seen starting")
    pid = children[0]
    wait_stop(pid)  # stopped before its first instruction
    return Tracee(pid, parent.saved)


def _make_over(child: Tracee, target: Target, cwd: bytes, scratch: str, writable: set[str]) -> Copy:
    """Give the copy its channels, its working directory, a session of its own and its ids, and nothing it shares,
    before it runs. Its ids last: a process whose ids changed is no longer dumpable, and its memory is not the
    agent's to write."""
    pid = child.pid
    size = (len(cwd) + len(scratch) + 2 * _PAGE) // _PAGE * _PAGE
    page = child.checked("mmap", 0, size, 3, 0x22, -1, 0)  # memory of its own to pass arguments in
    pairs, caps, null, home, path = page, page + 64, page + 128, page + 256, page + _PAGE
    write_memory(pid, caps, struct.pack("<Ii", _CAP_VERSION_3, 0) + bytes(24))  # no capability at all
    write_memory(pid, null, os.devnull.encode() + b"\0")
    write_memory(pid, home, scratch.encode() + b"\0")
    write_memory(pid, path, cwd)
    if not target.keeps:
        _private_mappings(child, writable)
        child.checked("close_range", ANSWERS_FD + 1, 0xFFFFFFFF, 0)
    # Its own channels, made in it (its pipes and socket pair); the agent takes its ends out of the copy by the
    # copy's pidfd. Nothing the kernel holds (whatever a cell left at its descriptors) is asked for or trusted.
    for i in range(3):
        child.checked("pipe2", pairs + 8 * i, _O_CLOEXEC)
    child.checked("socketpair", socket.AF_UNIX, socket.SOCK_STREAM | _O_CLOEXEC, 0, pairs + 24)
    ends = struct.unpack("<8i", read_memory(pid, pairs, 32))
    requests_r, requests_w, out_r, out_w, err_r, err_w, answers_ours, answers_theirs = ends
    theirs = [child.checked("openat", _AT_FDCWD, null, os.O_RDONLY | _O_CLOEXEC), out_w, err_w, requests_r]
    theirs.append(answers_theirs)
    pidfd = os.pidfd_open(pid)
    try:
        taken = [_take(pidfd, fd) for fd in (requests_w, out_r, err_r, answers_ours)]
    finally:
        os.close(pidfd)
    for fd in (requests_w, out_r, err_r, answers_ours):
        child.checked("close", fd)
    for i, fd in enumerate(theirs):
        if fd <= ANSWERS_FD:  # in a place the kernel had closed: moved past the five, where no dup3 lands
            theirs[i] = child.checked("fcntl", fd, _F_DUPFD_CLOEXEC, ANSWERS_FD + 1)
            child.checked("close", fd)
    for number, fd in enumerate(theirs):
        child.checked("dup3", fd, number, _O_CLOEXEC if number in (REQUESTS_FD, ANSWERS_FD) else 0)
        child.checked("close", fd)
    requests, stdout, stderr, answers_fd = taken
    for fd, mode in ((requests, 0o444), (stdout, 0o222), (stderr, 0o222)):
        os.fchmod(fd, mode)  # the mode the box gives a kernel's channels: none opens again by path
    answers = socket.socket(fileno=answers_fd)
    answers.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before it can write
    if child.call("chdir", path) < 0:  # one it cannot enter: its own scratch directory, never the parent's
        child.checked("chdir", home)
    # A session of its own: nothing of its parent's (a terminal, a process group the kernel may signal as a
    # whole, an orphaned group's SIGCONT) reaches it.
    child.checked("setsid")
    child.checked("prctl", _PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # its orphans stay its own
    child.checked("setresgid", target.gid, target.gid, target.gid)
    child.checked("setresuid", target.uid, target.uid, target.uid)
    child.checked("capset", caps, caps + 8)  # every capability its namespace gave it, gone
    # Dumpable again, as the kernel was (a change of ids clears it): its tracer for a fork of it is the agent, whose
    # capabilities are in the worker's namespace, not in that of the memory it inherited (the server's: a
    # session's kernel is forked from the agent's process, not executed), where a process not dumpable would ask.
    child.checked("prctl", _PR_SET_DUMPABLE, 1, 0, 0, 0)
    child.checked("munmap", page, size)
    return Copy(pid, requests, stdout, stderr, answers)


def _take(pidfd: int, fd: int) -> int:
    """Descriptor ``fd`` of the process of ``pidfd``, duplicated here (``pidfd_getfd``)."""
    got = int(_libc.syscall(_PIDFD_GETFD, pidfd, fd, 0))
    if got < 0:
        err = ctypes.get_errno()
        raise TraceFailed(err, f"a copy's channel could not be taken: {os.strerror(err)}")
    os.set_inheritable(got, False)
    return got


def _private_mappings(child: Tracee, writable: set[str]) -> None:
    """Every shared mapping of the copy (a file's, an anonymous one), and every mapping of a file of its parent's
    (on the ``writable`` file systems: the pages it never wrote follow the file), made an anonymous private one
    holding what it held: a mapping its parent or a sibling shares would be a channel between them."""
    with open(f"/proc/{child.pid}/maps") as f:
        maps = [line.split() for line in f]
    shared = [fields for fields in maps if fields[1][3] == "s" or fields[3] in writable]
    for fields in shared:
        start, end = (int(x, 16) for x in fields[0].split("-"))
        perms = fields[1]
        held = bytearray()
        for address in range(start, end, _PAGE):
            try:
                held += read_memory(child.pid, address, _PAGE)
            except OSError:
                held += bytes(_PAGE)  # past a file's end: nothing there
        prot = (1 if perms[0] == "r" else 0) | (2 if perms[1] == "w" else 0) | (4 if perms[2] == "x" else 0)
        child.checked("mmap", start, end - start, prot, _MAP_PRIVATE_ANONYMOUS_FIXED, -1, 0)
        write_memory(child.pid, start, bytes(held))


def _prepare(made: list[tuple[Tracee, Target]], kernel: int, mounts: Mounts) -> None:
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
        except _TooMany:
            code = 3
        finally:
            os._exit(code)
    for fd in (*procs, *joins, user):
        if fd >= 0:
            os.close(fd)
    _, status = os.waitpid(helper, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        raise Refused(f"the session holds more than {_MAX_FILES} files and directories: too many to copy")
    if code != 0:
        raise TraceFailed(0, "the copies' namespaces could not be made")


class _TooMany(Exception):
    pass


def _copy_tree(source: int, into: str, owner: int, count: list[int]) -> None:
    """Copy the tree under the directory ``source`` (a descriptor) into the directory ``into``: directories,
    files, links and fifos, with their modes and times, owned by ``owner``; nothing is followed. Directory by
    directory, each reached by a descriptor (no path grows with the tree's depth); ``count`` counts what was
    copied, at most :data:`_MAX_FILES`."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    pending = [(os.dup(source), os.open(into, flags))]
    while pending:
        src, dst = pending.pop()
        try:
            for name in os.listdir(src):
                count[0] += 1
                if count[0] > _MAX_FILES:
                    raise _TooMany
                info = os.stat(name, dir_fd=src, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    os.mkdir(name, 0o700, dir_fd=dst)
                    pending.append((os.open(name, flags, dir_fd=src), os.open(name, flags, dir_fd=dst)))
                elif stat.S_ISREG(info.st_mode):
                    reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src)
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


def _kill(pid: int) -> None:
    """Kill a copy still traced, and reap it: the tracer is told of its end first, and until it takes it, the
    copy's namespaces (and the box's, where it is one of its processes) cannot end."""
    try:
        os.kill(pid, 9)
        while True:
            _, status = os.waitpid(pid, 0x40000000)  # __WALL
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                break
    except OSError:
        pass
