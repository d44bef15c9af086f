"""The box: init of a pid namespace that forks one program per run and leaves nothing behind.

The box never reads request data (the agent writes files into its scratch space from outside), so the
program forked from it inherits a clean image. After each program ends the box kills every other process
in its namespace (``kill(-1)`` from a namespace's init reaches exactly those) and reaps them, so a
double-forked daemon cannot outlive its run.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from . import assert_runner, isolation, linux, pyrun, run_cpu
from .plain_data import Channel
from .protocol import EXEC_FAILED

MAX_FDS = 16
PROGRAM_NICE = 10
MEMORY_CHECK_MS = 50  # how often the memory of a whole run is summed while it runs


def _kill_all(*_: object) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class _Programs(NamedTuple):
    """Who programs run as, and what holds them."""

    uid: int
    gid: int
    seccomp: bool
    contained: bool  # in a container: no namespaces of our own (see isolation)
    cpu: int | None = None  # this worker's CPU, where its runs run (see _on_own_cpu)
    cpus: int = 1  # how many CPUs a run may spread its processes over (see run_cpu.CpuWatch)

    @property
    def other_uid(self) -> bool:
        """Whether programs have a uid of their own, which no supervisor has (the server or agent is root)."""
        return self.uid != os.geteuid()


class _Spare:
    """A program process forked ahead of time: it drops its privileges, then waits for its run.

    Forking a warm interpreter, installing the seccomp filter and dropping privileges take most of a
    millisecond; the spare does all of that while the box is idle, so a run only pays for what depends
    on the request. With ``session`` (the run's command), the process is a session's instead (see
    :func:`_serve_session`), forked when the session starts, with a descriptor of the scratch directory
    the agent wrote the program's files in (``files``).
    """

    def __init__(
        self, programs: _Programs, session: dict[str, Any] | None = None, files: int = -1, first_fresh: bool = False
    ) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            here.close()
            if session is not None:
                _serve_session(there, session, programs, files, first_fresh)
            _prepare(there, programs)
        there.close()
        self.sock = here

    def discard(self, wait: bool = True) -> None:
        self.sock.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        if wait:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


def serve(ctl: socket.socket, config: dict[str, Any]) -> None:
    """Main loop of the box process (pid 1 of its namespace). Exits when the agent goes away."""
    seccomp = config.get("seccomp", True) and linux.seccomp_supported()
    contained = not config["namespaces"]  # in a container: no namespaces of our own, see isolation
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[config["slot"] % len(cpus)] if "slot" in config else None
    programs = _Programs(
        config["program_uid"], config.get("program_gid", config["program_uid"]), seccomp, contained, cpu, len(cpus)
    )
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the agent's channel to the server is not the box's business
        os.dup2(null, fd)
    os.close(null)
    linux.set_dumpable(False)  # the program may not read this process's memory
    # The init of a namespace gets no signal from inside it that it does not handle: handle none.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    scratch: isolation.Scratch | isolation.WipedScratch
    memory: isolation.MemoryCgroup | None = None
    if contained:
        # Not a namespace's init here: orphaned daemons must still come to us to be reaped. The container's
        # memory cgroup bounds everything its processes hold; the box reads it.
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
        scratch = isolation.WipedScratch(programs.uid, programs.gid, ipc=not seccomp)
        memory = isolation.MemoryCgroup.own()
    else:
        isolation.enter_box()
        scratch = isolation.Scratch(config["tmp_bytes"], programs.uid, programs.gid)
        # A run is one session, and so one autogroup: one share of the CPU, however many processes it has.
        with contextlib.suppress(OSError), open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() == "0":
                sys.stderr.write("box: kernel.sched_autogroup_enabled is 0: runs share the CPU per process\n")
        memory = config.get("memory_cgroup")
        if memory is not None and not memory.join():
            memory = None
    scratch.reset(first=True)
    pyrun.warm_up()
    linux.prepare_seccomp()
    gc.freeze()  # keep the collector from touching (and so copying) every inherited page in the child
    # Forked after every reset: it must see the new scratch mount and IPC namespace, and nothing older.
    spare: _Spare | None = _Spare(programs)
    session: _Session | None = None
    _ready(ctl)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, MAX_FDS)
        except ConnectionError:
            msg, fds = b"", []
        if not msg:
            os._exit(0)  # the agent is gone; the kernel kills everything in this namespace with us
        cmd = json.loads(msg)
        if session is not None and cmd["op"] != "test":
            session.end()  # a session ends with the first request that is not one of its tests
            session = None
        if cmd["op"] == "reset":
            if spare is not None:
                spare.discard()
            scratch.reset()
            spare = _Spare(programs)
            _ready(ctl)
            continue
        if cmd["op"] == "run" and cmd.get("session"):
            discarded = 0
            if spare is not None:
                spare.discard(wait=False)  # it has the tests' uid: none of them may find it
                discarded, spare = spare.pid, None
            session = _Session(cmd, programs, scratch, memory, discarded)
            report = session.test(fds, ctl)
            session = session if report["session"] else None
            _answer(ctl, report)
        elif cmd["op"] == "run":
            # The agent resets the box between runs; a run without one still gets a fresh process.
            report = _run(cmd, fds, ctl, spare or _Spare(programs), memory, programs.cpus)
            spare = None
            _answer(ctl, report)
        elif cmd["op"] == "test" and session is not None:
            report = session.test(fds, ctl)
            session = session if report["session"] else None
            _answer(ctl, report)
        elif cmd["op"] == "test":
            for fd in fds:
                os.close(fd)
            ctl.sendall(json.dumps({"session": False, "broken": True}).encode())
        else:
            for fd in fds:
                os.close(fd)


def _answer(ctl: socket.socket, report: dict[str, Any]) -> None:
    """Send a run's report to the agent, and keep nothing of it: every later program (and the spare and
    session processes they run in) is forked from the box, and may walk up its stack to the box's frames."""
    ctl.sendall(json.dumps(report).encode())
    report.clear()


def _ready(ctl: socket.socket) -> None:
    # The agent reaches the scratch directory through this descriptor, never through a path.
    scratch = os.open(isolation.SCRATCH, os.O_RDONLY | os.O_DIRECTORY)
    try:
        socket.send_fds(ctl, [b'{"op":"ready"}'], [scratch])
    except OSError:
        os._exit(0)  # the agent went away while the box was being reset
    os.close(scratch)


def _files_kb() -> int:
    """What the files of a run hold in memory: the tmpfs of its scratch directory and of ``/dev/shm``."""
    total = 0
    for path in (isolation.SCRATCH, isolation.SHM):
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        total += (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    return total


class _Held:
    """What a run holds beyond its processes' own memory, above what it holds as it starts: files (a tmpfs
    is memory), and kernel memory (socket and pipe buffers, page tables, inodes) where a memory cgroup
    counts it."""

    def __init__(
        self, memory: isolation.MemoryCgroup | None, files_kb: int | None = None, checker: str | None = None
    ) -> None:
        self.memory = memory
        self.files_kb = _files_kb() if files_kb is None else files_kb
        self.kernel_kb = memory.kernel_kb() if memory is not None else 0
        # A session's checker is no run's process: what it holds (modules the tests imported, for one) stays
        # for the session's later runs, and what a run makes it hold is bounded by its own address-space
        # limit, the run's (see assert_runner.serve_checker, which ends its session when it has grown).
        self.checker = checker

    def now_kb(self) -> int:
        held = max(0, _files_kb() - self.files_kb)
        if self.memory is not None:
            held += max(0, self.memory.kernel_kb() - self.kernel_kb)
        return held


def _held_at_end(held: _Held, max_rss_kb: int, budget_kb: int) -> int:
    """What a run that ended by itself held at its end, with its largest process, if that is past its budget
    (else 0): files written all at once (``fallocate`` on a tmpfs) and a quick end escape the sums taken while
    it runs."""
    total = max_rss_kb + held.now_kb()
    return total if total > budget_kb else 0


def _run_memory_kb(budget_kb: int, held: _Held) -> int:
    """Memory of a run: every process in this pid namespace but the box (and, in a container, the agent),
    and what else it holds (see :class:`_Held`).

    First the resident sizes, which cost little to read but count a page shared after a fork once per
    process; only when they add up to more than the budget, the proportional set sizes, which count it
    once but make the kernel walk every mapping.
    """
    held_kb = held.now_kb()
    supervisors = {"1", str(os.getpid()), held.checker or "1"}
    pids = [name for name in os.listdir("/proc") if name.isdigit() and name not in supervisors]
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    resident = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                resident += int(f.read().split()[1]) * page_kb
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    if resident + held_kb <= budget_kb:
        return resident + held_kb
    total = held_kb
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue  # gone meanwhile, or a zombie
    return total


class _MemoryWatch:
    """Sums a run's memory every :data:`MEMORY_CHECK_MS` while the box waits for the run's events.

    In the box's own thread: a thread of its own would leave its stack and its malloc arena (tens of MiB) in
    the box's address space, and so in that of every run forked from it later, against its address-space
    limit. Most runs end before the first sum; a slow sum (hundreds of processes) spaces the next ones out.
    """

    def __init__(self, budget_kb: int, held: _Held, cpu: run_cpu.CpuWatch | None = None) -> None:
        self.budget_kb = budget_kb
        self.held = held
        self.cpu = cpu  # the run's CPU time, summed when it could be past its limit
        self.peak_kb = 0
        self.interval = MEMORY_CHECK_MS / 1000
        self.due = time.monotonic() + self.interval

    def poll(self, poller: select.poll) -> dict[int, int]:
        """Wait for events, summing the run's memory (and CPU time) when a sum is due; past its budget (or
        limit), the run is killed."""
        while True:
            memory = bool(self.budget_kb) and not self.over()
            cpu = self.cpu is not None and not self.cpu.over
            dues = [due for due, on in ((self.due, memory), (self.cpu.due if self.cpu else 0.0, cpu)) if on]
            if not dues:
                return dict(poller.poll())
            events = dict(poller.poll(max(0, int((min(dues) - time.monotonic()) * 1000) + 1)))
            if events:
                return events
            began = time.monotonic()
            if cpu and self.cpu is not None and began >= self.cpu.due and self.cpu.check():
                _kill_all()
            if not memory or began < self.due:
                continue
            self.peak_kb = max(self.peak_kb, _run_memory_kb(self.budget_kb, self.held))
            if self.over():
                _kill_all()
            # Never spend more than a tenth of the time summing.
            self.interval = max(MEMORY_CHECK_MS / 1000, (time.monotonic() - began) * 10)
            self.due = time.monotonic() + self.interval

    def over(self) -> bool:
        """Whether the run went over its budget (and was killed for it)."""
        return self.peak_kb > self.budget_kb


def _run(
    cmd: dict[str, Any],
    fds: list[int],
    ctl: socket.socket,
    spare: _Spare,
    memory: isolation.MemoryCgroup | None,
    cpus: int = 1,
) -> dict[str, Any]:
    # The address-space limit bounds each process; the run as a whole (every process it forked, and what
    # its files hold) gets the same budget, checked here; the memory cgroup, where there is one, bounds
    # everything else it can hold. (A container's memory cgroup is one more bound, around all of its runs.)
    budget_kb = (cmd["limits"].get("address_space_bytes") or 0) // 1024
    if memory is not None:
        memory.apply(budget_kb * 1024)
    # What it holds as it starts (the files it was given), read before the program can run: a program that
    # fills a tmpfs at once would otherwise be read into its own starting point, and never counted.
    held = _Held(memory)
    reaped = run_cpu.reaped_cpu_s()  # the run's processes, once the box reaps them, add to this
    start = time.monotonic()
    try:
        socket.send_fds(spare.sock, [json.dumps(cmd).encode()], fds)
    except OSError:
        pass  # the spare died while it waited: its exit status below tells how
    for fd in fds:
        os.close(fd)
    # Wait for the program while listening to the agent: it may ask for a kill, or go away.
    exited = os.pidfd_open(spare.pid)
    poller = select.poll()
    poller.register(exited, select.POLLIN)
    poller.register(ctl, select.POLLIN)
    watch = _MemoryWatch(budget_kb, held, run_cpu.CpuWatch(cmd["limits"], cpus, {"1", str(os.getpid())}))
    while True:
        events = watch.poll(poller)
        if exited in events:
            break
        if ctl.fileno() in events:
            msg = ctl.recv(1 << 16)
            _kill_all()
            if not msg:  # the agent is gone: nobody will read a result
                os._exit(0)
    over_budget = watch.over()
    os.close(exited)
    _, status, usage = os.wait4(spare.pid, 0)
    wall = time.monotonic() - start
    _kill_all()
    reap_all()
    # Every process of the run is reaped by now, by the box or by a process the box reaped: its whole tree.
    cpu = run_cpu.reaped_cpu_s() - reaped
    if watch.cpu is not None and watch.cpu.over_at_end(cpu):
        status = signal.SIGXCPU  # as the per-process limit ends a process: the run is out of CPU time
    # Past its budget the run was killed: its peak is reported as the memory it used, so that it reads as MLE.
    peak_kb = watch.peak_kb if over_budget else 0
    if memory is not None and memory.over():
        status, peak_kb = signal.SIGKILL, max(peak_kb, budget_kb)  # the kernel killed one of its processes
    elif budget_kb and (held_kb := _held_at_end(held, usage.ru_maxrss, budget_kb)):
        status, peak_kb = signal.SIGKILL, max(peak_kb, held_kb)
    spare.sock.setblocking(False)
    try:
        error = spare.sock.recv(4096).decode(errors="replace")
    except OSError:
        error = ""
    spare.sock.close()
    code, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
    return {
        "exit_code": code,
        "signal": sig,
        "wall": wall,
        "cpu": cpu,
        "max_rss_kb": max(usage.ru_maxrss, peak_kb),
        "error": error or None,
    }


def _sysv_objects() -> list[int]:
    """How many System V IPC objects there are (the seccomp filter refuses them; without it they are checked)."""
    counts = []
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}", "rb") as f:
            counts.append(f.read().count(b"\n"))
    return counts


class _Session:
    """Tests of one Python program, each in a process forked from one that holds the compiled program.

    A stdin/stdout test needs a fresh process, not a fresh interpreter: the session's process (forked from
    the box; it compiles the program and never runs it) forks one child per test, so a test pays for a
    fork, not for a reset, a spare and a compile. Nothing of one test reaches the next: each test gets its
    own process, descriptors, scratch directory and ``/dev/shm`` (fresh mounts, see ``isolation.Scratch``;
    emptied ones in a container), and the session ends (the agent goes on with a fresh box) as soon as a
    test leaves a process behind or its process dies with it. The session's process keeps ids that the
    tests do not have, so that no test can signal it, renice it or change its limits.
    """

    def __init__(
        self,
        cmd: dict[str, Any],
        programs: _Programs,
        scratch: isolation.Scratch | isolation.WipedScratch,
        memory: isolation.MemoryCgroup | None,
        spare: int,
    ) -> None:
        self.spare = spare  # the spare the session replaced, killed: reaped after the first test
        self.checker = 0  # the session's checker (assert runs), a supervisor as the session's process is
        self.programs = programs
        self.scratch = scratch
        self.memory = memory
        self.budget_kb = (cmd["limits"].get("address_space_bytes") or 0) // 1024
        self.limits = cmd["limits"]
        if memory is not None:
            memory.apply(self.budget_kb * 1024)
        self.files_kb = _files_kb()  # the files the program was given; every test gets the same again
        self.sysv = [] if programs.seccomp else _sysv_objects()
        # The first test too gets a scratch directory of its own where mounts can be made: none then holds
        # the agent's (whose memory counts against no run, and which the agent's descriptor keeps alive).
        first_fresh = isinstance(scratch, isolation.Scratch)
        files = os.open(isolation.SCRATCH, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.process = _Spare(programs, cmd, files, first_fresh)
        finally:
            os.close(files)
        self.exited = os.pidfd_open(self.process.pid)
        self.ready = True
        if first_fresh:
            try:
                scratch.swap()
            except OSError:
                self.ready = False

    def end(self) -> None:
        _kill_all()
        reap_all()
        if self.memory is not None:
            self.memory.over()  # what the kernel killed while the session ended is no later run's doing
        os.close(self.exited)
        self.process.sock.close()

    def test(self, fds: list[int], ctl: socket.socket) -> dict[str, Any]:
        """Run one test; the report says whether the session can take another (``session``)."""
        if not self.ready:  # no fresh scratch directory for it: the agent runs the test on its own
            for fd in fds:
                os.close(fd)
            self.end()
            return {"session": False, "broken": True}
        # Read before the test can run (see _run).
        held = _Held(self.memory, self.files_kb, str(self.checker) if self.checker else None)
        start = time.monotonic()
        sock = self.process.sock
        try:
            socket.send_fds(sock, [b'{"op":"test"}'], fds)
        except OSError:
            pass  # the session's process is gone: seen below
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            self.scratch.stage()  # the next test's scratch, while this one runs (swap() tries again)
        poller = select.poll()
        for fd in (self.exited, sock.fileno(), ctl.fileno()):
            poller.register(fd, select.POLLIN)
        cpu = run_cpu.CpuWatch(self.limits, self.programs.cpus, self._supervisors())
        watch = _MemoryWatch(self.budget_kb, held, cpu)
        raw, killed = b"", False
        while not raw:
            events = watch.poll(poller)
            if sock.fileno() in events:
                with contextlib.suppress(OSError):
                    raw = sock.recv(4096)
                if not raw:
                    break
            elif self.exited in events:
                break
            elif ctl.fileno() in events:
                msg = ctl.recv(1 << 16)
                _kill_all()
                killed = True
                if not msg:
                    os._exit(0)
                poller.unregister(ctl.fileno())
        over_budget = watch.over()
        peak = watch.peak_kb
        wall = time.monotonic() - start
        if self.memory is not None and self.memory.over():
            # The kernel killed a process of the test (or the session's process) for its memory.
            killed = over_budget = True
            peak = max(peak, self.budget_kb)
        if cpu.over and not over_budget:  # the box stopped it: its processes together ran out of CPU time
            self.end()
            return {"exit_code": None, "signal": signal.SIGXCPU, "wall": wall, "cpu": float(cpu.limit),
                    "max_rss_kb": None, "error": None, "session": False}  # fmt: skip
        if killed or over_budget:
            self.end()
            return {"exit_code": None, "signal": signal.SIGKILL, "wall": wall, "cpu": None,
                    "max_rss_kb": peak if over_budget else None, "error": None, "session": False}  # fmt: skip
        try:
            report = json.loads(raw) if raw else None
        except ValueError:
            report = None
        if not isinstance(report, dict) or report.get("broken"):
            # The program took its session's process (or its checker) down: the agent runs this test again alone.
            self.end()
            return {"session": False, "broken": True}
        self.checker = report.pop("supervisor", 0)
        retired = report.pop("retired", False)  # the checker has grown: the session ends with this test
        # The test's process reported what it and the children it reaped used; its orphans came to the box.
        report["cpu"] = (report.get("cpu") or 0.0) + run_cpu.living_cpu_s(self._supervisors())[0]
        if watch.cpu is not None and watch.cpu.over_at_end(report["cpu"]):
            report.update(exit_code=None, signal=signal.SIGXCPU)
        if self.budget_kb and (held_kb := _held_at_end(held, report.get("max_rss_kb") or 0, self.budget_kb)):
            report.update(exit_code=None, signal=signal.SIGKILL, max_rss_kb=held_kb)
        report.update(wall=wall, error=None, session=not retired and self._still_clean())
        if not report["session"]:
            self.end()
        return report

    def _supervisors(self) -> set[str]:
        """The processes in the box's namespace that are no test's: the box, the session's process, its checker
        (and in a container, the agent)."""
        return {"1", str(os.getpid()), str(self.process.pid), str(self.checker or 1)}

    def _still_clean(self) -> bool:
        """Whether the test left no process behind; if so, the next test's scratch is put in place."""
        while True:  # orphans of the test come to us: reap them, and remember that there were some
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False  # not even the session's process is left
            if pid == 0:
                break
            if pid != self.spare:
                return False
            self.spare = 0
        supervisors = self._supervisors()
        if any(name.isdigit() and name not in supervisors for name in os.listdir("/proc")):
            return False
        try:
            if not self.programs.seccomp and _sysv_objects() != self.sysv:
                return False
            self.scratch.swap()
        except OSError:
            return False
        return True


def _set_limits(limits: dict[str, Any], contained: bool, supervisors: int = 0, session: bool = False) -> None:
    """The run's limits on this process; ``supervisors``: processes of its uid that are not the run's.

    A session's process (``session``) takes all but those that each test sets for itself: the CPU time
    (the session's process outlives many tests) and the file size (it writes the tests' files).
    """

    def set_limit(which: int, soft: int, hard: int | None = None) -> None:
        resource.setrlimit(which, (soft, soft if hard is None else hard))

    if not session:
        _set_test_limits(limits)
    if limits.get("address_space_bytes"):
        set_limit(resource.RLIMIT_AS, limits["address_space_bytes"])
    if not contained:
        # In a container, RLIMIT_NPROC would count this uid's processes in every container on the host;
        # the container's pids limit bounds processes there.
        set_limit(resource.RLIMIT_NPROC, limits["processes"] + supervisors)
    set_limit(resource.RLIMIT_NOFILE, limits["open_files"])
    set_limit(resource.RLIMIT_CORE, 0)
    # POSIX message queues (which the seccomp filter refuses) are charged to the host user, not to the run.
    set_limit(resource.RLIMIT_MSGQUEUE, 0)


def _set_test_limits(limits: dict[str, Any]) -> None:
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)


def _wire(fds: list[int]) -> None:
    """Put the run's descriptors on 0, 1, 2, ... and close the originals."""
    # Lift every descriptor out of the way first, so wiring one to its number cannot clobber another
    # (above the targets, and below the open-files limit that a session's process already has).
    lifted = [fcntl.fcntl(fd, fcntl.F_DUPFD, len(fds)) for fd in fds]
    for fd in fds:
        os.close(fd)
    for target, fd in enumerate(lifted):
        os.dup2(fd, target, inheritable=True)
    for fd in lifted:
        os.close(fd)


def _detach(sock: socket.socket, also: int = -1) -> None:
    """First thing in a process forked from the box: keep only ``sock`` (and ``also``), default signals, a
    session of its own."""
    start = 3
    for keep in sorted({sock.fileno(), also} - {-1}):
        os.closerange(start, keep)
        start = keep + 1
    os.closerange(start, 1 << 16)
    for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.setsid()  # the one session (and autogroup) of the run: the seccomp filter refuses another
    # Where memory runs out (the box's memory cgroup, a container's), the kernel kills a run's process
    # first, never the box (or, in a container, the agent), which would make the run a sandbox error.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _on_own_cpu(programs: _Programs) -> None:
    """Put this process, which runs programs or supervises a session of them, on its worker's CPU.

    Runs of different workers then share no CPU (as far as there are CPUs), and a run's processes (an assert
    run's checker and program process call each other for every value the tests take from the program)
    switch on one CPU instead of waking another. The box and the agent stay where the kernel puts them. A
    program may spread its own processes out again; nothing else.
    """
    if programs.cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {programs.cpu})


def _become_program(programs: _Programs) -> None:
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


def _prepare(sock: socket.socket, programs: _Programs) -> NoReturn:
    """In the spare: drop every privilege, wait for the run, wire up descriptors, become the program.

    Launch errors go back to the box on ``sock``. It is close-on-exec, and closed before an in-process
    Python program starts, so a program can never write to it.
    """
    try:
        _detach(sock)
        _on_own_cpu(programs)
        _become_program(programs)
        if programs.seccomp:
            linux.install_seccomp()
        else:
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, MAX_FDS)
        if not msg:
            os._exit(0)  # the box went away
        cmd = json.loads(msg)
        _wire(fds)
        os.chdir(cmd["cwd"])
        os.environ.clear()
        os.environ.update(cmd["env"])
        _set_limits(cmd["limits"], programs.contained)
        if cmd.get("python"):
            # As the interpreter does at start-up: a closed pipe is an EPIPE error, not a signal.
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sock.close()
            os._exit(pyrun.run_script(cmd["python"], cmd["argv"][1:]))
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


def _snapshot(directory: int) -> list[tuple[str, int, bytes]]:
    """The regular files of ``directory`` (names, modes, contents), as the agent wrote them."""
    files = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
                with open(fd, "rb") as f:
                    files.append((entry.name, os.fstat(fd).st_mode & 0o7777, f.read()))
    return files


def _restore(files: list[tuple[str, int, bytes]]) -> None:
    for name, mode, data in files:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def _to_null() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _serve_session(
    sock: socket.socket, cmd: dict[str, Any], programs: _Programs, files_dir: int, first_fresh: bool
) -> NoReturn:
    """In a session's process: compile the program once, then fork a child for each test to run it in.

    This process never runs the program, and holds a test's descriptors only until its child has them. It
    keeps the supervisors' uid (with no capability but those to change ids, where programs have a uid of
    their own), so that no test may signal it, renice it, move it or change its limits, and is not
    dumpable, so that no test can trace it or read its memory. A test can at most kill it (where programs
    share its uid), which ends the session (see :class:`_Session`). Each test runs in the scratch directory
    the box made for it (with ``first_fresh``, the first too; else that one is the agent's), where its
    child first writes the program's files again, from the copy this process took in ``files_dir``.
    """
    try:
        _detach(sock, files_dir)
        _on_own_cpu(programs)
        linux.set_dumpable(False)
        if programs.other_uid:
            os.setgroups([])
            linux.set_file_ids(programs.uid, programs.gid)  # the tests' files are theirs
            linux.drop_capabilities(keep=(linux.CAP_SETUID, linux.CAP_SETGID))
        else:
            linux.drop_capabilities()
        files = _snapshot(files_dir)
        os.close(files_dir)  # holds no test's scratch directory
        os.environ.clear()
        os.environ.update(cmd["env"])
        # Where programs share this process's uid, it counts against their process limit.
        _set_limits(cmd["limits"], programs.contained, 0 if programs.other_uid else 1, session=True)
        os.setpriority(os.PRIO_PROCESS, 0, PROGRAM_NICE)  # its tests' priority, which they take from here
        if programs.seccomp:
            linux.install_seccomp()
        else:
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        # What every test's process would otherwise do first is done here once: signal dispositions as the
        # interpreter sets them, the compile, the standard streams (made on a pipe, as a test's are).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        name = os.path.relpath(cmd["python"], cmd["cwd"])
        code = pyrun.load(cmd["python"], next((data for n, _, data in files if n == name), None))
        here, there = os.pipe()
        for fd in (0, 1, 2):
            os.dup2(there if fd else here, fd)
        os.close(here)
        os.close(there)
        pyrun.install_streams(pyrun.make_streams())  # this process never prints: its 0-2 are /dev/null below
        _to_null()
    except BaseException as exc:
        try:
            sock.send(f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)
    # The assert runner's session: one checker for all its runs, and one process a run for the program.
    runner = assert_runner.RUNNER.encode()
    is_runner = next((d for n, _, d in files if n == name), b"") == runner
    checker = _start_checker(sock, cmd["cwd"]) if is_runner else None
    sock_fd = sock.fileno()
    limits, uid, gid = cmd["limits"], programs.uid, programs.gid
    restore = first_fresh

    def start_test() -> None:
        """In a test's process, first: its place, its files, its limits and the programs' uid."""
        try:
            os.close(sock_fd)
            os.setpgid(0, 0)  # a group of its own: kill(0) reaches the test's processes only
            os.chdir(cmd["cwd"])
            if restore:
                _restore(files)
            # As few steps as can be (each costs the test's time: the first touch of a page of this
            # process copies it): the other limits and the priority come from the session's process.
            _set_test_limits(limits)
            if uid != os.geteuid():
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
            linux.set_dumpable(True)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(2, f"sandbox: the test could not be started: {type(exc).__name__}: {exc}\n".encode())
            os._exit(127)

    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, MAX_FDS)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the box went away
        if checker is not None:
            report = _assert_test(checker, fds, cmd["python"], start_test)
        else:
            _wire(fds)  # on this process's 0-2 until the fork: the child then has them where they belong
            pid = os.fork()
            if pid == 0:
                start_test()
                os._exit(pyrun.run_script(cmd["python"], cmd["argv"][1:], code, streams_made=True))
            _to_null()  # the test's output ends when its processes end, not when this one does
            _, status, usage = os.wait4(pid, 0)
            report = _status_report(status, usage)
        restore = True
        sock.send(json.dumps(report).encode())


def _status_report(status: int, usage: Any, extra_cpu: float = 0.0) -> dict[str, Any]:
    code, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
    return {"exit_code": code, "signal": sig, "cpu": usage.ru_utime + usage.ru_stime + extra_cpu,
            "max_rss_kb": usage.ru_maxrss}  # fmt: skip


class _Checker(NamedTuple):
    pid: int
    sock: socket.socket


def _start_checker(sock: socket.socket, cwd: str) -> _Checker:
    """Fork the session's checker (see ``assert_runner.serve_checker``): it keeps this process's uid, which
    programs do not have, with no capability at all, and is not dumpable, so that no program can reach it."""
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()  # the box's: not the checker's business
            here.close()
            linux.drop_capabilities()
        except BaseException:
            os._exit(127)
        assert_runner.serve_checker(there, cwd)
    there.close()
    return _Checker(pid, here)


def _assert_test(checker: _Checker, fds: list[int], main: str, start_test: Callable[[], None]) -> dict[str, Any]:
    """One assert run of the session: the checker gets its stdin and output, and a channel to the program's
    process, forked here; the verdict is theirs together (``assert_runner.outcome_status``)."""
    stdin, stdout, stderr = fds[:3]
    for fd in fds[3:]:
        os.close(fd)
    with contextlib.suppress(ProcessLookupError):
        os.kill(checker.pid, signal.SIGCONT)  # where programs share its uid, one may have stopped it
    program_reads, checker_writes = os.pipe()
    checker_reads, program_writes = os.pipe()
    try:
        socket.send_fds(checker.sock, [b"run"], [stdin, stdout, stderr, checker_reads, checker_writes])
    except OSError:
        pass  # the checker is gone: seen below, when it does not answer
    for fd in (stdin, checker_reads, checker_writes):
        os.close(fd)
    _wire([os.open(os.devnull, os.O_RDONLY), stdout, stderr])  # the program's process has no stdin
    pid = os.fork()
    if pid == 0:
        checker.sock.close()  # the checker's answers are this process's alone
        start_test()
        sys.argv = [os.path.basename(main)]  # as `python3 main.py` in its directory has it
        sys.path.insert(0, os.path.dirname(main))
        assert_runner.serve_program(Channel(program_reads, program_writes))
    os.close(program_reads)
    os.close(program_writes)
    _to_null()  # the test's output ends when its processes end, not when this one does
    try:
        answer = json.loads(checker.sock.recv(4096) or b"null")
    except (OSError, ValueError):
        answer = None
    _, status, usage = os.wait4(pid, 0)
    if not isinstance(answer, dict) or answer.get("outcome") not in assert_runner.OUTCOMES:
        # The program took the checker down (where it shares its uid): the agent runs this test again alone.
        return {"broken": True}
    code, sig = assert_runner.outcome_status(answer["outcome"], status)
    report = _status_report(status, usage, float(answer.get("cpu") or 0.0))
    report.update(exit_code=code, signal=sig, supervisor=checker.pid, retired=bool(answer.get("retired")))
    return report
