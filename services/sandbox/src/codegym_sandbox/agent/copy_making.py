"""A fork's copies made over (``kernel_copy.py``): channels, a working directory, a process session, ids and no
capability of their own, and nothing they share, before any instruction of theirs runs.

Each copy's calls are a few programs (``ptrace_each.run_each``), each run in every copy at once: the first
makes its anonymous private mappings and its channels while the helper still makes its files
(``copy_files.start``); the next, once they are there, move its channels into place, enter its working
directory, map its own files where the kernel mapped the session's, and take its session and ids. Its ids
come last: a process whose ids changed is no longer dumpable, and its memory is not the agent's
to write. What each copy was made into is then read back from outside it (:func:`check`), not taken from its
calls' answers.
"""

from __future__ import annotations

import ctypes
import os
import socket
import stat
import struct
from dataclasses import dataclass

from . import acting_ids, copy_files, copy_mappings, linux
from .copy_files import Helper, Target
from .process_memory import read_memory
from .ptrace_calls import Call, Tracee, TraceFailed
from .ptrace_each import call_each, run_each
from .session_main import ANSWERS_FD, REQUESTS_FD

_PAGE = 4096
CODE = 2 * _PAGE  # room for a program in the memory a copy is made over with (its results and data after it)
_CAP_VERSION_3 = 0x20080522
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_F_DUPFD_CLOEXEC = 1030
_O_CLOEXEC = 0o2000000
_AT_FDCWD = -100
_PIDFD_GETFD = 438
_MS_NOSUID, _MS_NODEV = 2, 4
_RESULTS = 64  # a result each in the 512 bytes before the data
_FILES = 14  # mappings of files made in one program (three calls each)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


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


Program = tuple[Tracee, int, int, list[Call], bytes, int]
Files = tuple[list[copy_mappings.Mapping], tuple[str, ...]]  # the mappings a fork chose, and its files' mount points


class _Making:
    """One copy as it is made over, in ``memory`` (``page``, ``size``: its own, its parent's copied), which it
    gives back at the end."""

    def __init__(self, child: Tracee, target: Target, mappings: list[copy_mappings.Mapping], memory: tuple[int, int]):
        self.child, self.target, self.pid = child, target, child.pid
        self.page, self.size = memory
        self.results = self.page + CODE
        self.pairs, self.caps, self.limit = self.results + 512, self.results + 576, self.results + 608
        self.null, self.path = self.results + 640, self.results + _PAGE
        self.mounting_data = self.results + 768  # its mounts' names and options (:meth:`mounts`), before the path
        # Anonymous ones made first (the kernel's scratch files are still there); a file's once its copy is made.
        self.anonymous = [] if target.keeps else [m for m in mappings if not m.path]
        self.files = [] if target.keeps else [m for m in mappings if m.path]
        self.taken: list[int] = []
        self.calls: list[Call] = []
        self.closes: list[Call] = []
        self.mounts_asked: list[Call] = []

    def program(self, calls: list[Call], data: bytes = b"") -> Program:
        assert len(calls) <= _RESULTS
        return (self.child, self.page, self.results, calls, data, self.pairs)

    def run(self, calls: list[Call], data: bytes = b"") -> list[int]:
        return _checked(self.pid, calls, self.child.run(*self.program(calls, data)[1:]), len(calls))

    def first(self, data: bytes) -> Program:
        """Its anonymous private mappings (the first program's worth: the rest are made before, one program each),
        its own channels, made in it (its pipes and socket pair: the agent takes its ends out of the copy by its
        pidfd), and the session's process limit again. Nothing the kernel holds (whatever a cell left at its
        descriptors) is asked for or trusted."""
        head, rest = self.anonymous[: copy_mappings.BATCH], self.anonymous[copy_mappings.BATCH :]
        copy_mappings.make(lambda calls, checked: self.run(calls), rest)  # what they hold is written by fill
        calls = copy_mappings.mmap_calls(head)
        calls += [] if self.target.keeps else [("close_range", (ANSWERS_FD + 1, 0xFFFFFFFF, 0))]
        calls += [("pipe2", (self.pairs + 8 * i, _O_CLOEXEC)) for i in range(3)]
        calls += [("socketpair", (socket.AF_UNIX, socket.SOCK_STREAM | _O_CLOEXEC, 0, self.pairs + 24))]
        calls += [("prlimit64", (0, linux.RLIMIT_NPROC, self.limit, 0))]  # the session's again (kernel_copy.py)
        calls += [("openat", (_AT_FDCWD, self.null, os.O_RDONLY | _O_CLOEXEC))]
        self.calls = calls
        return self.program(calls, data)

    def mounts(self, own: list[tuple[str, str]]) -> Program:
        """In a container, its own tmpfs mounts (``own``: a mount point and its options each), made by the copy with
        the capabilities its new namespace gave it, once its id maps are written (the options name its user)."""
        data = bytearray(b"tmpfs\0")
        calls: list[Call] = []
        for point, options in own:
            at = len(data)
            data += point.encode() + b"\0"
            given = len(data)
            data += options.encode() + b"\0"
            where = self.mounting_data
            calls.append(("mount", (where, where + at, where, _MS_NOSUID | _MS_NODEV, where + given)))
        if self.mounting_data + len(data) > self.path:
            raise TraceFailed(0, "a copy's mount options are too long to give it")
        self.mounts_asked = calls
        return (self.child, self.page, self.results, calls, bytes(data), self.mounting_data)

    def mounted(self, got: list[int]) -> None:
        _checked(self.pid, self.mounts_asked, got, len(got))

    def took(self, got: list[int]) -> None:
        """Take its channels' ends, and write the second program: its descriptors in place, its directory, its
        session and ids."""
        head = min(len(self.anonymous), copy_mappings.BATCH)
        copy_mappings.check_made(self.anonymous[:head], got[:head])
        _checked(self.pid, self.calls, got, len(got))
        ends = struct.unpack("<8i", read_memory(self.pid, self.pairs, 32))
        requests_r, requests_w, out_r, out_w, err_r, err_w, answers_ours, answers_theirs = ends
        theirs = [got[-1], out_w, err_w, requests_r, answers_theirs]
        pidfd = os.pidfd_open(self.pid)
        try:
            for fd in (requests_w, out_r, err_r, answers_ours):
                self.taken.append(_take(pidfd, fd))
        finally:
            os.close(pidfd)
        # What was taken is what was made (pipes and a socket), whatever the copy's memory said their numbers
        # were: never a file of its own (the agent, root, changes the modes of these).
        requests, stdout, stderr, answers = self.taken
        if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (requests, stdout, stderr)) or not stat.S_ISSOCK(
            os.fstat(answers).st_mode
        ):
            raise TraceFailed(0, f"process {self.pid} did not make the channels it was asked to")
        for fd, mode in ((requests, 0o444), (stdout, 0o222), (stderr, 0o222)):
            _chmod(fd, mode)  # the mode the box gives a kernel's channels: none opens again by path
        closes: list[Call] = [("close", (fd,)) for fd in (requests_w, out_r, err_r, answers_ours)]
        low = [fd for fd in theirs if fd <= ANSWERS_FD]
        if low:  # in a place the kernel had closed: moved past the five, where no dup3 lands
            moves: list[Call] = [("fcntl", (fd, _F_DUPFD_CLOEXEC, ANSWERS_FD + 1)) for fd in low]
            moved = dict(zip(low, self.run(moves), strict=True))
            closes += [("close", (fd,)) for fd in low]
            theirs = [moved.get(fd, fd) for fd in theirs]
        for number, fd in enumerate(theirs):
            flags = _O_CLOEXEC if number in (REQUESTS_FD, ANSWERS_FD) else 0
            closes += [("dup3", (fd, number, flags)), ("close", (fd,))]
        self.closes = closes

    def lasts(self, paths: dict[int, int]) -> list[list[Call]]:
        """The programs that follow, once its files are made: its descriptors in place and its working directory
        (the kernel's, in its own files: see ``kernel_copy._working_directory``); its mappings of
        files of the session's own, made of its own files (their paths written at ``paths``, by mapping); then a
        session of its own (nothing of its parent's, a terminal, a process group the kernel may signal as a
        whole, an orphaned group's SIGCONT, reaches it) whose orphans stay its own (a subreaper), its ids, and
        every capability its namespace gave it taken. Dumpable again, as the kernel was (a change of ids clears
        it): its tracer for a fork of it is the agent, whose capabilities are in the worker's namespace, not in
        that of the memory it inherited (the server's: a session's kernel is forked from the agent's process,
        not executed), where a process not dumpable would ask."""
        # The continuation is in the kernel's directory already (a clone); a copy enters its own copy of it.
        steps = [[*self.closes, *([] if self.target.keeps else [("chdir", (self.path,))])]]
        for i in range(0, len(self.files), _FILES):
            batch = self.files[i : i + _FILES]  # each mapping's calls, three, from its place in the program
            steps.append([c for k, m in enumerate(batch) for c in copy_mappings.file_calls(m, paths[m.start], 3 * k)])
        tail: list[Call] = [("setsid", ()), ("prctl", (_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))]
        tail += [("setresgid", (self.target.gid,) * 3), ("setresuid", (self.target.uid,) * 3)]
        tail += [("capset", (self.caps, self.caps + 8)), ("prctl", (_PR_SET_DUMPABLE, 1, 0, 0, 0))]
        steps[-1] += tail
        return steps

    def ran(self, step: int, calls: list[Call], got: list[int]) -> None:
        """Check what the program ``step`` of :meth:`lasts` did."""
        _checked(self.pid, calls, got, len(got))
        for i, (name, args) in enumerate(calls):
            if name == "mmap" and got[i] != args[0]:
                raise TraceFailed(0, "a mapping was not made where it was asked")

    def done(self) -> Copy:
        requests, stdout, stderr, answers = self.taken
        self.taken = []
        socket_ = socket.socket(fileno=answers)
        socket_.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before it can write
        return Copy(self.pid, requests, stdout, stderr, socket_)

    def close(self) -> None:
        for fd in self.taken:
            os.close(fd)
        self.taken = []


def make_over(
    made: list[tuple[Tracee, Target]],
    cwd: bytes,
    mappings: list[copy_mappings.Mapping],
    memory: tuple[int, int],
    files: Helper,
    limit: tuple[int, int],
) -> list[Copy]:
    """Make each copy of ``made`` over, in ``memory`` of its own (:func:`room`); ``files`` makes every copy's
    files and id maps meanwhile (the programs after the first need them), and in a container has the copies
    mount their own tmpfs between the two. ``limit``: the process limit (soft, hard) each copy sets itself."""
    data = bytearray(_PAGE - 512)
    data[64:96] = struct.pack("<Ii", _CAP_VERSION_3, 0) + bytes(24)  # no capability at all
    data[96:112] = struct.pack("<2q", *limit)
    data[128 : 128 + len(os.devnull) + 1] = os.devnull.encode() + b"\0"
    # Each file's path once (a file mapped many times is one path), after the working directory's: where each
    # mapping's is written, by its start.
    where: dict[bytes, int] = {}
    size = 0
    for path in dict.fromkeys(m.path for m in mappings if m.path):
        where[path], size = size, size + len(path) + 1
    base = memory[0] + CODE + _PAGE + len(cwd)
    paths = {m.start: base + where[m.path] for m in mappings if m.path}
    written = bytes(data) + cwd + b"".join(path + b"\0" for path in where)
    makings = [_Making(child, target, mappings, memory) for child, target in made]
    try:
        firsts = [making.first(written) for making in makings]
        for making, got in zip(makings, run_each(firsts), strict=True):
            making.took(got)
        if files.copies_mount:
            files.maps_made()
            mounting = [making for making in makings if not making.target.keeps]
            programs = [making.mounts(copy_files.own_mounts(making.target, files.mounts)) for making in mounting]
            for making, got in zip(mounting, run_each(programs), strict=True):
                making.mounted(got)
            files.mounted()
        files.wait()
        steps = [making.lasts(paths) for making in makings]
        for step in range(max(len(s) for s in steps)):
            doing = [(making, s[step]) for making, s in zip(makings, steps, strict=True) if step < len(s)]
            ran = run_each([making.program(calls) for making, calls in doing])
            for (making, calls), got in zip(doing, ran, strict=True):
                making.ran(step, calls, got)
        # The memory each was made over in, given back by all at once.
        unmapped = call_each([(making.child, ("munmap", (making.page, making.size))) for making in makings])
        for making, result in zip(makings, unmapped, strict=True):
            _checked(making.pid, [("munmap", ())], [result], 1)
        return [making.done() for making in makings]
    except BaseException:
        for making in makings:
            making.close()
        raise


def room(cwd: bytes, mappings: list[copy_mappings.Mapping]) -> int:
    """The memory a copy is made over in: its programs, their results and what they are given."""
    given = len(cwd) + sum(len(path) + 1 for path in {m.path for m in mappings if m.path})
    return CODE + (given + 2 * _PAGE) // _PAGE * _PAGE


def check(pid: int, target: Target, kernel_ids: set[int], theirs: set[str], files: Files) -> None:
    """What the copy was made into, read back from outside it, not taken from its calls' answers: its ids (the
    kernel's, ``kernel_ids``, for the session's continuation), no capability, a process session of its own, its
    own memory cgroup, and only its five descriptors, no mapping of a file on ``theirs`` (the devices of the
    kernel's files), and each mapping of a file of ``files`` one of the copy's own files (the continuation keeps
    its own)."""
    info = os.stat(f"/proc/{pid}")
    with acting_ids.files_as(info.st_uid, info.st_gid):  # its entries' owner's: a container's agent passes no mode by
        _check(pid, target, kernel_ids, theirs, files)


def _check(pid: int, target: Target, kernel_ids: set[int], theirs: set[str], files: Files) -> None:
    status = status_of(pid)
    caps = [int(status[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")]
    if ids(status) != (kernel_ids if target.keeps else set(target.owner)) or any(caps) or os.getsid(pid) != pid:
        raise TraceFailed(0, f"process {pid} was not made what it was asked to be")
    if target.memory is None or pid not in target.memory.pids():
        raise TraceFailed(0, f"process {pid} is not in the memory cgroup made for it")
    if target.keeps:
        return
    if sorted(os.listdir(f"/proc/{pid}/fd")) != ["0", "1", "2", "3", "4"]:
        raise TraceFailed(0, f"process {pid} holds descriptors it was not given")
    with open(f"/proc/{pid}/maps", "rb") as f:
        table = f.read()
    mappings, points = files
    remade = [m for m in mappings if m.path]
    # Its table is read line by line only where a line could be what is looked for (a fork into 16 reads 16 of
    # them, some 100 lines each, which cost it milliseconds): a mapping of a device of ``theirs`` names it between
    # spaces, and the mappings of files made again are looked up by their starts.
    if not remade and not any(b" %s " % device.encode() in table for device in theirs):
        return
    mapped: dict[int, str] = {}  # each mapping's device, by its start
    for line in table.splitlines():
        fields = line.split(maxsplit=5)
        mapped[int(fields[0].split(b"-")[0], 16)] = fields[3].decode()
    if any(device in theirs for device in mapped.values()):
        raise TraceFailed(0, f"process {pid} maps a file of the session it was copied from")
    # Each mapping made again of a file is of one of the copy's own files: on its own file systems (which hold
    # nothing else), at the start the kernel's was.
    own = {copy_mappings.device(os.stat(b"/proc/%d/root%s" % (pid, os.fsencode(point))).st_dev) for point in points}
    for m in remade:
        if m.start not in mapped or mapped[m.start] not in own:
            raise TraceFailed(0, f"process {pid} maps something else than its own file where the session mapped one")


def status_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def ids(status: dict[str, str]) -> set[int]:
    """Every uid and gid of a process, as the agent sees them."""
    return {int(x) for x in status["Uid"].split() + status["Gid"].split()}


def _checked(pid: int, calls: list[Call], got: list[int], count: int) -> list[int]:
    for (name, _), result in zip(calls[:count], got, strict=False):
        if result < 0:
            raise TraceFailed(-result, f"{name} in process {pid}: {os.strerror(-result)}")
    return got


def _chmod(fd: int, mode: int) -> None:
    """Change the mode of a copy's pipe: as its owner, the copy's user, where the agent passes no file's mode
    (a container's, whose file ids are its programs' and which has no ``CAP_FOWNER``)."""
    try:
        os.fchmod(fd, mode)
    except PermissionError:
        info = os.fstat(fd)
        with acting_ids.files_as(info.st_uid, info.st_gid):
            os.fchmod(fd, mode)


def _take(pidfd: int, fd: int) -> int:
    """Descriptor ``fd`` of the process of ``pidfd``, duplicated here (``pidfd_getfd``)."""
    got = int(_libc.syscall(_PIDFD_GETFD, pidfd, fd, 0))
    if got < 0:
        err = ctypes.get_errno()
        raise TraceFailed(err, f"a copy's channel could not be taken: {os.strerror(err)}")
    os.set_inheritable(got, False)
    return got
