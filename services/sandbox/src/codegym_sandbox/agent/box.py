"""The box: init of a pid namespace that forks one program per run and leaves nothing behind.

The box never reads request data (the agent writes files into its scratch space from outside), so the
program forked from it inherits a clean image. After each program ends the box kills every other process
in its namespace (``kill(-1)`` from a namespace's init reaches exactly those) and reaps them, so a
double-forked daemon cannot outlive its run.
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import gc
import json
import os
import resource
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, NoReturn

from . import isolation, linux, pyrun

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


class _Spare:
    """A program process forked ahead of time: it drops its privileges, then waits for its run.

    Forking a warm interpreter, installing the seccomp filter and dropping privileges take most of a
    millisecond; the spare does all of that while the box is idle, so a run only pays for what depends
    on the request.
    """

    def __init__(self, program_uid: int, seccomp: bool, contained: bool) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            here.close()
            _prepare(there, program_uid, seccomp, contained)
        there.close()
        self.sock = here

    def discard(self) -> None:
        self.sock.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def serve(ctl: socket.socket, config: dict[str, Any]) -> None:
    """Main loop of the box process (pid 1 of its namespace). Exits when the agent goes away."""
    program_uid = config["program_uid"]
    seccomp = config.get("seccomp", True) and linux.seccomp_supported()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the agent's channel to the server is not the box's business
        os.dup2(null, fd)
    os.close(null)
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # the program may not read this process's memory
    contained = not config["namespaces"]  # in a container: no namespaces of our own, see isolation
    if contained:
        # Not a namespace's init here: orphaned daemons must still come to us to be reaped.
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
        isolation.wipe_box()
    else:
        isolation.enter_box()
        isolation.reset_box(config["tmp_bytes"], program_uid, first=True)
    pyrun.warm_up()
    linux.prepare_seccomp()
    gc.freeze()  # keep the collector from touching (and so copying) every inherited page in the child
    # Forked after every reset: it must see the new scratch mount and IPC namespace, and nothing older.
    spare: _Spare | None = _Spare(program_uid, seccomp, contained)
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
            if contained:
                isolation.wipe_box()
            else:
                isolation.reset_box(config["tmp_bytes"], program_uid, first=False)
            spare = _Spare(program_uid, seccomp, contained)
            _ready(ctl)
            continue
        if cmd["op"] == "run" and cmd.get("session"):
            session = _Session(cmd, spare or _Spare(program_uid, seccomp, contained))
            spare = None
            report = session.test(fds, ctl)
            session = session if report["session"] else None
            ctl.sendall(json.dumps(report).encode())
        elif cmd["op"] == "run":
            # The agent resets the box between runs; a run without one still gets a fresh process.
            report = _run(cmd, fds, ctl, spare or _Spare(program_uid, seccomp, contained))
            spare = None
            ctl.sendall(json.dumps(report).encode())
        elif cmd["op"] == "test" and session is not None:
            report = session.test(fds, ctl)
            session = session if report["session"] else None
            ctl.sendall(json.dumps(report).encode())
        elif cmd["op"] == "test":
            for fd in fds:
                os.close(fd)
            ctl.sendall(json.dumps({"session": False, "broken": True}).encode())
        else:
            for fd in fds:
                os.close(fd)


def _ready(ctl: socket.socket) -> None:
    # The agent reaches the scratch directory through this descriptor, never through a path.
    scratch = os.open(isolation.SCRATCH, os.O_RDONLY | os.O_DIRECTORY)
    socket.send_fds(ctl, [b'{"op":"ready"}'], [scratch])
    os.close(scratch)


def _run_memory_kb(budget_kb: int, stopped: Callable[[], bool]) -> int:
    """Memory of every process in this pid namespace but the box (and, in a container, the agent).

    First the resident sizes, which cost little to read but count a page shared after a fork once per
    process; only when they add up to more than the budget, the proportional set sizes, which count it
    once but make the kernel walk every mapping.
    """
    supervisors = {"1", str(os.getpid())}
    pids = [name for name in os.listdir("/proc") if name.isdigit() and name not in supervisors]
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    resident = 0
    for pid in pids:
        if stopped():
            return 0
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                resident += int(f.read().split()[1]) * page_kb
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    if resident <= budget_kb:
        return resident
    total = 0
    for pid in pids:
        if stopped():
            return 0
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
    """Sums a run's memory on a thread of its own, so that a slow sum never delays the box's answers.

    A low-level thread: the ``threading`` module would add fork hooks to every later fork of the box.
    Started only once a run has lasted :data:`MEMORY_CHECK_MS` (see :meth:`poll`): most runs end sooner,
    and starting a thread costs more than a short run's whole supervision.
    """

    @staticmethod
    def poll(
        poller: select.poll, watch: _MemoryWatch | None, budget_kb: int
    ) -> tuple[dict[int, int], _MemoryWatch | None]:
        """Wait for events; past the first check's time with none, start the watch (its first sum at once)."""
        if watch is not None or not budget_kb:
            return dict(poller.poll()), watch
        events = dict(poller.poll(MEMORY_CHECK_MS))
        return events, (None if events else _MemoryWatch(budget_kb))

    def __init__(self, budget_kb: int) -> None:
        self.budget_kb = budget_kb
        self.peak_kb = 0
        self.stopped = False
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._done = _thread.allocate_lock()
        self._done.acquire()
        _thread.start_new_thread(self._watch, ())

    def _watch(self) -> None:
        try:
            interval = 0.0  # started a check's interval into the run: the first sum is due now
            while not self._wake.acquire(timeout=interval):
                began = time.monotonic()
                self.peak_kb = max(self.peak_kb, _run_memory_kb(self.budget_kb, lambda: self.stopped))
                if self.peak_kb > self.budget_kb and not self.stopped:
                    _kill_all()
                    return
                # Hundreds of processes make a sum slow: never spend more than a tenth of the time summing.
                interval = max(MEMORY_CHECK_MS / 1000, (time.monotonic() - began) * 10)
        finally:
            self._done.release()

    def stop(self) -> bool:
        """Stop watching; whether the run went over its budget (and was killed for it)."""
        self.stopped = True
        self._wake.release()
        self._done.acquire()
        return self.peak_kb > self.budget_kb


def _run(cmd: dict[str, Any], fds: list[int], ctl: socket.socket, spare: _Spare) -> dict[str, Any]:
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
    # The address-space limit bounds each process; the run as a whole (every process it forked) gets the
    # same budget, checked here. (A container's memory cgroup is one more bound, around all of its runs.)
    budget_kb = (cmd["limits"].get("address_space_bytes") or 0) // 1024
    watch: _MemoryWatch | None = None
    while True:
        events, watch = _MemoryWatch.poll(poller, watch, budget_kb)
        if exited in events:
            break
        if ctl.fileno() in events:
            msg = ctl.recv(1 << 16)
            _kill_all()
            if not msg:  # the agent is gone: nobody will read a result
                os._exit(0)
    over_budget = watch is not None and watch.stop()
    os.close(exited)
    _, status, usage = os.wait4(spare.pid, 0)
    wall = time.monotonic() - start
    _kill_all()
    reap_all()
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
        "cpu": usage.ru_utime + usage.ru_stime,
        # Past its budget the run was killed: report its peak as the memory it used, so that it reads as MLE.
        "max_rss_kb": max(usage.ru_maxrss, watch.peak_kb if watch is not None and over_budget else 0),
        "error": error or None,
    }


def _leftovers() -> tuple[Any, ...]:
    """What a test could leave for the next one to find: files, shared memory, System V IPC objects.

    Change times, which no program can set back, tell a rewritten file from the one the agent wrote.
    """
    with os.scandir(isolation.SCRATCH) as entries:
        files = sorted((e.name, e.inode(), e.stat(follow_symlinks=False).st_ctime_ns) for e in entries)
    ipc = []
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}", "rb") as f:
            ipc.append(f.read().count(b"\n"))
    return files, sorted(os.listdir("/dev/shm")), ipc


class _Session:
    """Tests of one Python program, each in a process forked from one that holds the compiled program.

    A stdin/stdout test needs a fresh process, not a fresh interpreter: the session's process (a spare
    that has compiled the program and never runs it) forks one child per test, so a test pays for a fork,
    not for a reset, a spare and a compile. Nothing of one test reaches the next: each test gets its own
    process and descriptors, and the session ends (the agent goes on with a fresh box) as soon as a test
    leaves anything behind (a process, a file, shared memory) or its process dies with it.
    """

    def __init__(self, cmd: dict[str, Any], spare: _Spare) -> None:
        self.spare = spare
        self.budget_kb = (cmd["limits"].get("address_space_bytes") or 0) // 1024
        self.exited = os.pidfd_open(spare.pid)
        try:
            socket.send_fds(spare.sock, [json.dumps(cmd).encode()], [])
            self.clean: tuple[Any, ...] | None = _leftovers()
        except OSError:
            self.clean = None  # the spare died while it waited, or the scratch space is not readable

    def end(self) -> None:
        _kill_all()
        reap_all()
        os.close(self.exited)
        self.spare.sock.close()

    def test(self, fds: list[int], ctl: socket.socket) -> dict[str, Any]:
        """Run one test; the report says whether the session can take another (``session``)."""
        start = time.monotonic()
        try:
            socket.send_fds(self.spare.sock, [b'{"op":"test"}'], fds)
        except OSError:
            pass  # the session's process is gone: seen below
        for fd in fds:
            os.close(fd)
        poller = select.poll()
        for fd in (self.exited, self.spare.sock.fileno(), ctl.fileno()):
            poller.register(fd, select.POLLIN)
        watch: _MemoryWatch | None = None
        raw, killed = b"", False
        while not raw:
            events, watch = _MemoryWatch.poll(poller, watch, self.budget_kb)
            if self.spare.sock.fileno() in events:
                with contextlib.suppress(OSError):
                    raw = self.spare.sock.recv(4096)
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
        over_budget = watch is not None and watch.stop()
        wall = time.monotonic() - start
        if killed or over_budget:
            self.end()
            peak = watch.peak_kb if watch is not None and over_budget else None
            return {"exit_code": None, "signal": signal.SIGKILL, "wall": wall, "cpu": None, "max_rss_kb": peak,
                    "error": None, "session": False}  # fmt: skip
        try:
            report = json.loads(raw) if raw else None
        except ValueError:
            report = None
        if not isinstance(report, dict):
            # The program took its session's process down with it: the agent runs this test again alone.
            self.end()
            return {"session": False, "broken": True}
        report.update(wall=wall, error=None, session=self._still_clean())
        if not report["session"]:
            self.end()
        return report

    def _still_clean(self) -> bool:
        while True:  # orphans of the test come to us: reap them, and remember that there were some
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False  # not even the session's process is left
            if pid == 0:
                break
            return False
        supervisors = {"1", str(os.getpid()), str(self.spare.pid)}
        if any(name.isdigit() and name not in supervisors for name in os.listdir("/proc")):
            return False
        try:
            return self.clean is not None and _leftovers() == self.clean
        except OSError:
            return False


def _set_limits(limits: dict[str, Any], contained: bool, supervisors: int = 0) -> None:
    def set_limit(which: int, soft: int, hard: int | None = None) -> None:
        resource.setrlimit(which, (soft, soft if hard is None else hard))

    cpu = max(1, int(limits["cpu_s"] + 0.999))
    set_limit(resource.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU first, SIGKILL a second later
    if limits.get("address_space_bytes"):
        set_limit(resource.RLIMIT_AS, limits["address_space_bytes"])
    if not contained:
        # In a container, RLIMIT_NPROC would count this uid's processes in every container on the host;
        # the container's pids limit bounds processes there.
        set_limit(resource.RLIMIT_NPROC, limits["processes"] + supervisors)  # a session's process is not the run's
    set_limit(resource.RLIMIT_FSIZE, limits["file_size_bytes"])
    set_limit(resource.RLIMIT_NOFILE, limits["open_files"])
    set_limit(resource.RLIMIT_CORE, 0)


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


def _prepare(sock: socket.socket, program_uid: int, seccomp: bool, contained: bool) -> None:
    """In the spare: drop every privilege, wait for the run, wire up descriptors, become the program.

    Launch errors go back to the box on ``sock``. It is close-on-exec, and closed before an in-process
    Python program starts, so a program can never write to it.
    """
    try:
        keep = sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        if program_uid != os.geteuid():
            os.setgroups([])
            os.setresgid(program_uid, program_uid, program_uid)
            os.setresuid(program_uid, program_uid, program_uid)
        else:
            linux.drop_capabilities()
        linux.prctl(linux.PR_SET_DUMPABLE, 1)
        # Below its supervisors: the hundreds of busy processes of a fork bomb must not starve the box and
        # the agent that enforce its deadline (in a container they all share one CPU quota).
        os.setpriority(os.PRIO_PROCESS, 0, PROGRAM_NICE)
        if seccomp:
            linux.install_seccomp()
        else:
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, MAX_FDS)
        if not msg:
            os._exit(0)  # the box went away
        cmd = json.loads(msg)
        if not cmd.get("session"):
            _wire(fds)
        os.chdir(cmd["cwd"])
        os.environ.clear()
        os.environ.update(cmd["env"])
        _set_limits(cmd["limits"], contained, 1 if cmd.get("session") else 0)
        if cmd.get("session"):
            _serve_session(sock, cmd)
        if cmd.get("python"):
            # As the interpreter does at start-up: a closed pipe is an EPIPE error, not a signal.
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sock.close()
            os._exit(pyrun.run_script(cmd["python"], cmd["argv"][1:]))
        os.execve(cmd["argv"][0], cmd["argv"], cmd["env"])
    except BaseException as exc:
        try:
            sock.send(f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)


def _serve_session(sock: socket.socket, cmd: dict[str, Any]) -> NoReturn:
    """In a session's process: compile the program once, then fork a child for each test to run it in.

    This process never runs the program, and holds a test's descriptors only until its child has them.
    Not dumpable, so that no test can trace it or read its memory; a test can only kill it, which ends the
    session (see :class:`_Session`).
    """
    linux.prctl(linux.PR_SET_DUMPABLE, 0)
    # What every test's process would otherwise do first is done here once: signal dispositions as the
    # interpreter sets them, the compile, the standard streams (made on a pipe, as a test's are).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = pyrun.load(cmd["python"])
    here, there = os.pipe()
    for fd in (0, 1, 2):
        os.dup2(there if fd else here, fd)
    os.close(here)
    os.close(there)
    pyrun.install_streams(pyrun.make_streams())  # this process never prints: its 0-2 are /dev/null below
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sock_fd = sock.fileno()
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, MAX_FDS)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the box went away
        _wire(fds)  # on this process's 0-2 until the fork: the child then has them where they belong
        pid = os.fork()
        if pid == 0:
            try:
                os.close(sock_fd)
                os.setsid()
                linux.prctl(linux.PR_SET_DUMPABLE, 1)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.write(2, f"sandbox: the test could not be started: {type(exc).__name__}: {exc}\n".encode())
                os._exit(127)
            os._exit(pyrun.run_script(cmd["python"], cmd["argv"][1:], code, streams_made=True))
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # the test's output ends when its processes end, not when this one does
        _, status, usage = os.wait4(pid, 0)
        code_, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
        report = {"exit_code": code_, "signal": sig, "cpu": usage.ru_utime + usage.ru_stime,
                  "max_rss_kb": usage.ru_maxrss}  # fmt: skip
        sock.send(json.dumps(report).encode())
