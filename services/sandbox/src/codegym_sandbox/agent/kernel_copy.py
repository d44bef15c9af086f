"""Copies of a session's kernel: a fork that is as isolated from its parent and its siblings as two sessions are.

A kernel's state is its process's memory, which only the kernel's own ``fork`` copies exactly (random state,
objects, everything a cell left). But a fork shares its parent's user, namespaces and open files: it could
signal its siblings, write their files, or meet them in a pipe or shared mapping they all inherited. So the
copy is made by the agent, as the kernel's tracer (``ptrace_calls.py``), while the kernel waits between cells,
and each copy is made over before any instruction of it runs:

* **Namespaces and a host user of its own.** The kernel clones itself into a new user, mount and pid
  namespace (the seccomp filter lets a namespace through only to a process its tracer lets through: the
  agent's). The agent maps the copy's program uid to a host user no other session has (a copy kept as the
  parent's continuation keeps the parent's), sets its ids, and takes every capability the new namespace gave it,
  before it runs. Being the init of its own pid namespace, it and everything it starts end together.
* **Nothing shared.** Every descriptor it inherited is closed; it gets new standard streams and channels to the
  agent. Every shared mapping is made a private one with the same contents. Its scratch directory and
  ``/dev/shm`` are new tmpfs mounts holding a copy of the parent's files, owned by its user, and it has a devpts
  instance of its own.
* **The parent is kept, stopped.** The copies' namespaces belong to the parent's host user: were the parent
  ever to run again, it could act in them. So the parent never does: a copy made at the same time takes its
  place as the session's kernel (:func:`copy_kernel`'s first target), and the parent stays stopped, holding the
  memory its copies share with it, until the worker ends.

A kernel is copied only as it waits for its next cell, alone: one thread, no other process (a copy holds one
thread of one process; anything else of the session would be lost, or left to the copies to share).
"""

from __future__ import annotations

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

# A user namespace (its ids), a mount namespace (its files), a pid namespace (its processes, ended with it). Its
# box's IPC and UTS namespaces it shares: no program may make System V or POSIX IPC objects (the seccomp filter)
# or change the host name (no capability).
CLONE_FLAGS = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWPID
_SIGCHLD = 17
_CAP_VERSION_3 = 0x20080522
_MAP_PRIVATE_ANONYMOUS_FIXED = 0x02 | 0x20 | 0x10
_PAGE = 4096
_PR_SET_DUMPABLE = 4
_F_DUPFD_CLOEXEC = 1030


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


def copy_kernel(kernel: int, root: int, answers: socket.socket, targets: list[Target], mounts: Mounts) -> list[Copy]:
    """Copies of ``kernel`` (waiting for a cell on its requests pipe; ``answers`` the agent's end of its answers
    socket; ``root`` the process its session's orphans go to), one per target, each stopped until it is
    continued; ``kernel`` is left stopped for good."""
    check_alone(kernel, root)
    try:
        parent = Tracee.seize(kernel, lambda regs: regs.orig_rax == NR["read"] and regs.rdi == REQUESTS_FD)
    except TraceFailed as exc:
        raise Refused("the session's interpreter is not waiting for a cell") from exc
    made: list[tuple[Tracee, Target]] = []
    try:
        check_alone(kernel, root)  # again, now that it is stopped: nothing of it can start anything more
        cwd = os.readlink(f"/proc/{kernel}/cwd").encode() + b"\0"
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
        for child, _ in made:
            resource.prlimit(child.pid, resource.RLIMIT_NPROC, (soft, hard))
        _prepare(made, kernel, mounts)
        copies = [_make_over(child, target, answers, cwd) for child, target in made]
        for child, target in made:
            for group in (target.memory, target.meter):
                if group is not None:
                    group.add(child.pid)
            child.release(stopped=True)
    except BaseException:
        for child, _ in made:
            _kill(child.pid)
        raise
    finally:
        parent.release(stopped=True)
    return copies


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


def _make_over(child: Tracee, target: Target, answers: socket.socket, cwd: bytes) -> Copy:
    """Give the copy its channels, its working directory and its ids, and nothing it shares, before it runs.
    Its ids last: a process whose ids changed is no longer dumpable, and its memory is not the agent's to write."""
    pid = child.pid
    page = child.checked("mmap", 0, _PAGE, 3, 0x22, -1, 0)  # a page of its own to pass arguments in
    iovec, data, control, caps, path = page + 64, page + 128, page + 256, page + 512, page + 1024
    control_len = 16 + 4 * 5 + 4  # CMSG_SPACE of five descriptors
    write_memory(pid, page, struct.pack("<QIiQQQQi4x", 0, 0, 0, iovec, 1, control, control_len, 0))  # msghdr
    write_memory(pid, iovec, struct.pack("<QQ", data, 1))
    write_memory(pid, caps, struct.pack("<Ii", _CAP_VERSION_3, 0) + bytes(24))  # no capability at all
    write_memory(pid, path, cwd[: _PAGE - 1024])
    if not target.keeps:
        _private_mappings(child)
        child.checked("close_range", ANSWERS_FD + 1, 0xFFFFFFFF, 0)
    # Its own channels: sent on the parent's answers socket (nobody else reads it: the session is stopped),
    # received by the copy, put where the kernel keeps them (session_main).
    null = os.open(os.devnull, os.O_RDONLY)
    requests_r, requests = os.pipe()
    stdout, out_w = os.pipe()
    stderr, err_w = os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    for fd, mode in ((requests_r, 0o444), (out_w, 0o222), (err_w, 0o222)):
        os.fchmod(fd, mode)
    given = [null, out_w, err_w, requests_r, theirs.fileno()]
    try:
        socket.send_fds(answers, [b"c"], given)
    finally:
        for fd in (null, out_w, err_w, requests_r):
            os.close(fd)
        theirs.close()
    if child.call("recvmsg", ANSWERS_FD, page, 0x40000000) != 1:  # MSG_CMSG_CLOEXEC
        raise TraceFailed(0, "the copy did not take its channels")
    received = list(struct.unpack("<5i", read_memory(pid, control + 16, 20)))
    for i, fd in enumerate(received):
        if fd <= ANSWERS_FD:  # in a place the kernel had closed: moved past the five, where no dup3 lands
            received[i] = child.checked("fcntl", fd, _F_DUPFD_CLOEXEC, ANSWERS_FD + 1)
            child.checked("close", fd)
    for number, fd in enumerate(received):
        child.checked("dup3", fd, number, 0x80000 if number in (REQUESTS_FD, ANSWERS_FD) else 0)
        child.checked("close", fd)
    child.call("chdir", path)  # on its own mounts now; one it cannot enter leaves it where it is
    child.checked("setresgid", target.gid, target.gid, target.gid)
    child.checked("setresuid", target.uid, target.uid, target.uid)
    child.checked("capset", caps, caps + 8)  # every capability its namespace gave it, gone
    # Dumpable again, as the kernel was (a change of ids clears it): its tracer for a fork of it is the agent, whose
    # capabilities are in the worker's namespace, not in that of the memory it inherited (the server's: a
    # session's kernel is forked from the agent's process, not executed), where a process not dumpable would ask.
    child.checked("prctl", _PR_SET_DUMPABLE, 1, 0, 0, 0)
    child.checked("munmap", page, _PAGE)
    return Copy(pid, requests, stdout, stderr, ours)


def _private_mappings(child: Tracee) -> None:
    """Every shared mapping of the copy (a file's, an anonymous one) made a private one holding what it held:
    a mapping its parent or a sibling shares would be a channel between them."""
    with open(f"/proc/{child.pid}/maps") as f:
        shared = [line.split() for line in f if line.split()[1][3] == "s"]
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
                owner = target.owner
                for point, options in ((mounts.scratch, mounts.scratch_options), (mounts.shm, mounts.shm_options)):
                    old = os.open(point, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    owned = f"{options},uid={owner},gid={owner}" if point == mounts.scratch else options
                    linux.mount("tmpfs", point, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, owned)
                    _copy_tree(old, point, owner)
                    os.close(old)
                linux.mount("devpts", "/dev/pts", "devpts", linux.MS_NOSUID | linux.MS_NOEXEC, mounts.devpts_options)
            code = 0
        finally:
            os._exit(code)
    for fd in (*procs, *joins, user):
        if fd >= 0:
            os.close(fd)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise TraceFailed(0, "the copies' namespaces could not be made")


def _copy_tree(source: int, into: str, owner: int) -> None:
    """Copy the tree under the directory ``source`` (a descriptor) into ``into``: directories, files,
    links and fifos, with their modes and times, owned by ``owner``; nothing is followed."""
    for name in os.listdir(source):
        info = os.stat(name, dir_fd=source, follow_symlinks=False)
        path = f"{into}/{name}"
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(path, 0o700)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
            try:
                _copy_tree(inner, path, owner)
            finally:
                os.close(inner)
        elif stat.S_ISREG(info.st_mode):
            src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
            try:
                with open(src, "rb", closefd=False) as reader, open(path, "xb") as writer:
                    shutil.copyfileobj(reader, writer, 1 << 20)
            finally:
                os.close(src)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(name, dir_fd=source), path)
        elif stat.S_ISFIFO(info.st_mode):
            os.mkfifo(path)
        else:
            continue  # a socket or a device node: nothing a copy can hold
        os.chown(path, owner, owner, follow_symlinks=False)
        if not stat.S_ISLNK(info.st_mode):
            os.chmod(path, stat.S_IMODE(info.st_mode))
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


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
