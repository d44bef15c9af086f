"""The programs' processes: who they run as, how one is prepared for its run, and how a run's end is made sure of.

Every process that runs a program is forked from the box (or from a test series' process, see
``test_series.py``), and prepares itself here: it keeps only its own descriptors, drops its privileges, takes
its run's limits and becomes the program.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import signal
import socket
from typing import NamedTuple, NoReturn, cast

from . import linux, pyrun
from .box_protocol import RunCommand, TestStatus
from .protocol import EXEC_FAILED, SOURCE_ERROR, Limits
from .run_cgroup import RunCgroup

MAX_FDS = 16
PROGRAM_NICE = 10


def kill_all(*_: object) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def rewind_pids() -> None:
    """Start the box's pid namespace counting from 1 again, before the first process of a run is forked: a run
    that forked many times would otherwise move the count on, and the next run on this worker would read it
    (``getpid()``, ``/proc/sys/kernel/ns_last_pid``), a channel between runs. Every process of the last run is
    gone, so the run's first process gets the same pid every time. The box may write it: it is root in the
    worker's user namespace, which owns the pid namespace (a container's box is not, and leaves it)."""
    with contextlib.suppress(OSError):
        if _pid_counter:
            os.pwrite(_pid_counter[0], b"1", 0)
        else:  # a box that made /proc/sys no read-only (a container's, which may not write it anyway)
            _write("/proc/sys/kernel/ns_last_pid", "1")


_pid_counter: list[int] = []  # the box's descriptor of ns_last_pid, where it holds one


def hold_pid_counter() -> None:
    """Open ``ns_last_pid`` for :func:`rewind_pids` before the box makes ``/proc/sys`` read-only (a write through a
    descriptor opened before is checked against the writer's ids and capabilities alone; a program has neither)."""
    with contextlib.suppress(OSError):
        _pid_counter.append(os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class Programs(NamedTuple):
    """Who programs run as, and what holds them."""

    uid: int
    gid: int
    seccomp: bool
    contained: bool  # in a container: no namespaces of our own (see isolation)
    cpu: int | None = None  # this worker's CPU, where its runs run (see on_own_cpu)
    cpus: int = 1  # how many CPUs a run may spread its processes over (see run_cpu.CpuWatch)
    cgroup: RunCgroup | None = None  # where every process of a run is (see run_cgroup.py)

    @property
    def other_uid(self) -> bool:
        """Whether programs have a uid of their own, which no supervisor has (the server or agent is root)."""
        return self.uid != os.geteuid()


STACK_BYTES = 8 << 20


def set_limits(limits: Limits, contained: bool, supervisors: int = 0, series: bool = False) -> None:
    """The run's limits on this process; ``supervisors``: processes of its uid that are not the run's.

    A series' process (``series``) takes all but those that each test sets for itself: the CPU time
    (the series' process outlives many tests) and the file size (it writes the tests' files).
    """

    def set_limit(which: int, soft: int, hard: int | None = None) -> None:
        resource.setrlimit(which, (soft, soft if hard is None else hard))

    if not series:
        set_test_limits(limits)
    if limits["address_space_bytes"]:
        set_limit(resource.RLIMIT_AS, limits["address_space_bytes"])
    if not contained:
        # In a container, RLIMIT_NPROC would count this uid's processes in every container on the host;
        # the container's pids limit bounds processes there.
        # The hard limit is left as it is (high): no program may change its process limit (the seccomp filter),
        # and a session's copies are made under it (kernel_copy.py).
        set_limit(
            resource.RLIMIT_NPROC, limits["processes"] + supervisors, resource.getrlimit(resource.RLIMIT_NPROC)[1]
        )
    set_limit(resource.RLIMIT_NOFILE, limits["open_files"])
    set_limit(resource.RLIMIT_CORE, 0)
    # The stack of every run, whatever the server was started with (a shell's 8 MiB, a cluster's "unlimited"):
    # else the same deep recursion passed on one deployment and crashed on another. Not more: a thread's stack
    # is as large by default, and counts in the address space of runs held to their memory by it.
    try:  # and as far as a program may raise it, as its own (`ulimit -s unlimited` in a solution's first lines)
        set_limit(resource.RLIMIT_STACK, STACK_BYTES, resource.RLIM_INFINITY)
    except (ValueError, OSError):  # a supervisor that may not raise its own hard limit: that limit, then
        set_limit(resource.RLIMIT_STACK, STACK_BYTES, resource.getrlimit(resource.RLIMIT_STACK)[1])
    # POSIX message queues (which the seccomp filter refuses) are charged to the host user, not to the run.
    set_limit(resource.RLIMIT_MSGQUEUE, 0)
    # No locked memory: a run that locked pages of a file every run reads (a toolchain's) held them in the memory
    # cgroup of the worker that read them first, where its honest run could neither reclaim them nor grow (MLE).
    set_limit(resource.RLIMIT_MEMLOCK, 0)


def set_test_limits(limits: Limits) -> None:
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)


def wire(fds: list[int]) -> None:
    """Put the run's descriptors on 0, 1, 2, ... and close the originals."""
    # Lift every descriptor out of the way first, so wiring one to its number cannot clobber another
    # (above the targets, and below the open-files limit that a series' process already has).
    lifted = [fcntl.fcntl(fd, fcntl.F_DUPFD, len(fds)) for fd in fds]
    for fd in fds:
        os.close(fd)
    for target, fd in enumerate(lifted):
        os.dup2(fd, target, inheritable=True)
    for fd in lifted:
        os.close(fd)


def detach(sock: socket.socket, *also: int) -> None:
    """First thing in a process forked from the box: keep only ``sock`` (and ``also``: -1 for none), default
    signals, a process session of its own."""
    start = 3
    for keep in sorted({sock.fileno(), *also} - {-1}):
        os.closerange(start, keep)
        start = keep + 1
    os.closerange(start, 1 << 16)
    for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.setsid()  # the one process session (and autogroup) of the run: the seccomp filter refuses another
    # Where memory runs out (the box's memory cgroup, a container's), the kernel kills a run's process
    # first, never the box (or, in a container, the agent), which would make the run a sandbox error.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def on_own_cpu(programs: Programs) -> None:
    """Put this process, which runs programs or supervises a test series of them, on its worker's CPU.

    Runs of different workers then share no CPU (as far as there are CPUs), and a run's processes (an assert
    run's checker and program process call each other for every value the tests take from the program)
    switch on one CPU instead of waking another. The box and the agent stay where the kernel puts them. A
    program may spread its own processes out again; nothing else.
    """
    if programs.cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {programs.cpu})


def become_program(programs: Programs) -> None:
    """Take the programs' uid (or, with the supervisors' uid, drop every capability) and a lower priority."""
    if programs.other_uid:
        os.setgroups([])
        os.setresgid(programs.gid, programs.gid, programs.gid)
        os.setresuid(programs.uid, programs.uid, programs.uid)
    else:
        linux.drop_capabilities()
    linux.set_dumpable(True)
    # Below its supervisors: the hundreds of busy processes of a fork bomb must not starve the box and
    # the agent that enforce its deadline (in a container they all share one CPU quota).
    os.setpriority(os.PRIO_PROCESS, 0, PROGRAM_NICE)


def prepare(sock: socket.socket, programs: Programs) -> NoReturn:
    """In the spare: drop every privilege, wait for the run, wire up descriptors, become the program.

    Launch errors go back to the box on ``sock``. It is close-on-exec, and closed before an in-process
    Python program starts, so a program can never write to it.
    """
    try:
        if programs.cgroup is not None:
            programs.cgroup.join()  # first, so that every process of the run is in it
        detach(sock)
        on_own_cpu(programs)
        become_program(programs)
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, MAX_FDS)
        if not msg:
            os._exit(0)  # the box went away
        cmd = cast(RunCommand, json.loads(msg))  # the box's: trusted to be what it says
        wire(fds)
        # Its limits before the filter, which refuses a program any change of its process limit.
        set_limits(cmd["limits"], programs.contained)
        if programs.seccomp:
            linux.install_seccomp()
        else:
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        os.chdir(cmd["cwd"])
        os.environ.clear()
        os.environ.update(cmd["env"])
        if python := cmd["python"]:
            # As the interpreter does at start-up: a closed pipe is an EPIPE error, not a signal.
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code, unparsed = pyrun.load(python)  # before any of the program runs: so this is no program's word
            if unparsed:
                sock.send(SOURCE_ERROR.encode())
            sock.close()
            os._exit(pyrun.run_script(python, cmd["argv"][1:], code))
        try:
            os.execve(cmd["argv"][0], cmd["argv"], cmd["env"])
        except OSError as exc:  # tagged: the server tells a program that cannot start from the box's failure
            sock.send(f"{EXEC_FAILED}{type(exc).__name__}: {exc}".encode())
            os._exit(127)
    except BaseException as exc:
        try:
            sock.send(f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)


def to_null() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def status_report(status: int, usage: resource.struct_rusage, extra_cpu: float = 0.0) -> TestStatus:
    code, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
    return {
        "exit_code": code,
        "signal": sig,
        "cpu": usage.ru_utime + usage.ru_stime + extra_cpu,
        "max_rss_kb": usage.ru_maxrss,
    }
