"""Test series: the tests of one Python program, one after another, each in a process forked from one that
holds the compiled program (the series' process), and the box's side of them (:class:`TestSeries`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import time
from typing import NoReturn

from . import assert_runner, isolation, linux, program_module, pyrun, run_cgroup, run_cpu
from .box_protocol import AssertStatus, Broken, BrokenStatus, RunCommand, SeriesReport, TestStatus, read_series_report
from .checker_process import assert_test, start_checker
from .memory_cgroup import MemoryCgroup
from .programs import (
    MAX_FDS,
    PROGRAM_NICE,
    Programs,
    detach,
    kill_all,
    on_own_cpu,
    prepare,
    reap_all,
    set_limits,
    set_test_limits,
    status_report,
    to_null,
    wire,
)
from .run_memory import Held, MemoryWatch, held_at_end, scratch_files_kb


class Spare:
    """A program process forked ahead of time: it drops its privileges, then waits for its run.

    Forking a warm interpreter, installing the seccomp filter and dropping privileges take most of a
    millisecond; the spare does all of that while the box is idle, so a run only pays for what depends
    on the request. With ``series`` (the run's command), the process is a series' instead (see
    :func:`serve_test_series`), forked when the series starts, with a descriptor of the scratch directory
    the agent wrote the program's files in (``files``).
    """

    def __init__(
        self, programs: Programs, series: RunCommand | None = None, files: int = -1, first_fresh: bool = False
    ) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            here.close()
            if series is not None:
                serve_test_series(there, series, programs, files, first_fresh)
            prepare(there, programs)
        there.close()
        self.sock = here

    def discard(self, wait: bool = True) -> None:
        self.sock.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        if wait:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


def sysv_objects() -> list[int]:
    """How many System V IPC objects there are (the seccomp filter refuses them; without it they are checked)."""
    counts = []
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}", "rb") as f:
            counts.append(f.read().count(b"\n"))
    return counts


class TestSeries:
    """Tests of one Python program, each in a process forked from one that holds the compiled program.

    A stdin/stdout test needs a fresh process, not a fresh interpreter: the series' process (forked from
    the box; it compiles the program and never runs it) forks one child per test, so a test pays for a
    fork, not for a reset, a spare and a compile. Nothing of one test reaches the next: each test gets its
    own process, descriptors, scratch directory and ``/dev/shm`` (fresh mounts, see ``isolation.Scratch``;
    emptied ones in a container), and the series ends (the agent goes on with a fresh box) as soon as a
    test leaves a process behind or its process dies with it. The series' process keeps ids that the
    tests do not have, so that no test can signal it, renice it or change its limits.
    """

    def __init__(
        self,
        cmd: RunCommand,
        programs: Programs,
        scratch: isolation.Scratch | isolation.WipedScratch,
        memory: MemoryCgroup | None,
        spare: int,
    ) -> None:
        self.spare = spare  # the spare the series replaced, killed: reaped after the first test
        self.checker = 0  # the series' checker (assert runs), a supervisor as the series' process is
        self.programs = programs
        self.scratch = scratch
        self.memory = memory
        self.budget_kb = cmd["limits"]["memory_bytes"] // 1024
        self.limits = cmd["limits"]
        if memory is not None:
            memory.apply(self.budget_kb * 1024)
        self.files_kb = scratch_files_kb()  # the files the program was given; every test gets the same again
        self.sysv = [] if programs.seccomp else sysv_objects()
        # The first test too gets a scratch directory of its own where mounts can be made: none then holds
        # the agent's (whose memory counts against no run, and which the agent's descriptor keeps alive).
        first_fresh = isinstance(scratch, isolation.Scratch)
        files = os.open(isolation.SCRATCH, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.process = Spare(programs, cmd, files, first_fresh)
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
        kill_all()
        reap_all()
        if self.memory is not None:
            self.memory.over()  # what the kernel killed while the series ended is no later run's doing
        os.close(self.exited)
        self.process.sock.close()

    def test(self, fds: list[int], ctl: socket.socket) -> SeriesReport | Broken:
        """Run one test; the report says whether the series can take another (its ``more`` field)."""
        if not self.ready:  # no fresh scratch directory for it: the agent runs the test on its own
            for fd in fds:
                os.close(fd)
            self.end()
            return {"more": False, "broken": True}
        # Read before the test can run (see _run).
        held = Held(self.memory, self.files_kb, str(self.checker) if self.checker else None)
        # The kernel's count of the run's cgroup (the test's processes, none yet) starts here; the checker's own.
        cpu = run_cpu.CpuWatch(self.limits, self.programs.cpus, self._supervisors(), self.programs.cgroup)
        checker_s = run_cgroup.checker_cpu_s(str(self.checker), self.programs.cgroup) if self.checker else 0.0
        start = time.monotonic()
        sock = self.process.sock
        try:
            socket.send_fds(sock, [b'{"op":"test"}'], fds)
        except OSError:
            pass  # the series' process is gone: seen below
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            self.scratch.stage()  # the next test's scratch, while this one runs (swap() tries again)
        poller = select.poll()
        for fd in (self.exited, sock.fileno(), ctl.fileno()):
            poller.register(fd, select.POLLIN)
        watch = MemoryWatch(self.budget_kb, held, cpu)
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
                kill_all()
                killed = True
                if not msg:
                    os._exit(0)
                poller.unregister(ctl.fileno())
        over_budget = watch.over()
        peak = watch.peak_kb
        wall = time.monotonic() - start
        if self.memory is not None and self.memory.over():
            # The kernel killed a process of the test (or the series' process) for its memory.
            killed = over_budget = True
            peak = max(peak, self.budget_kb)
        stopped = cpu.over and not over_budget  # the box stopped it: its processes together ran out of CPU time
        if stopped or killed or over_budget:
            self.end()
            return {
                "exit_code": None,
                "signal": signal.SIGXCPU if stopped else signal.SIGKILL,
                "wall": wall,
                "cpu": float(cpu.limit) if stopped else None,
                "max_rss_kb": peak if over_budget else None,
                "error": None,
                "more": False,
            }
        # Read against its type: one that is not (or says so) means the program took its series' process (or its
        # checker) down, and the agent runs this test again alone.
        status = read_series_report(raw) if raw else None
        if status is None:
            self.end()
            return {"more": False, "broken": True}
        self.checker, retired = 0, False
        if "supervisor" in status:
            self.checker = status["supervisor"]
            retired = status["retired"]  # the checker has grown: the series ends with this test
        report: SeriesReport = {
            "exit_code": status["exit_code"],
            "signal": status["signal"],
            "cpu": self._cpu(cpu, status["cpu"], checker_s),
            "max_rss_kb": status["max_rss_kb"],
            "wall": wall,
            "error": None,
            "more": False,
        }
        if watch.cpu is not None and watch.cpu.over_at_end(report["cpu"] or 0.0):
            report["exit_code"], report["signal"] = None, signal.SIGXCPU
        if self.budget_kb and (held_kb := held_at_end(held, report["max_rss_kb"] or 0, self.budget_kb)):
            report["exit_code"], report["signal"], report["max_rss_kb"] = None, signal.SIGKILL, held_kb
        if status.get("unparsed"):
            report["unparsed"] = True
        report["more"] = not retired and self._still_clean()
        if not report["more"]:
            self.end()
        return report

    def _cpu(self, watch: run_cpu.CpuWatch, reported: float, checker_s: float) -> float:
        """A test's CPU time: by the kernel's count, its processes' and the checker's for it; without one, what its
        process reported (its own, its reaped children's, the checker's) and its orphans'."""
        if watch.meter is None:
            return reported + run_cpu.living_cpu_s(self._supervisors())[0]
        watch.supervisors = self._supervisors()  # with the checker, where the test started it
        checker = run_cgroup.checker_cpu_s(str(self.checker), self.programs.cgroup) - checker_s if self.checker else 0.0
        return watch.used_at_end(reported) + max(0.0, checker)

    def _supervisors(self) -> set[str]:
        """The box's processes that are no test's: the box, the series', its checker and its children, an agent."""
        checker = [str(self.checker), *run_cgroup.checker_children(str(self.checker))] if self.checker else []
        return {"1", str(os.getpid()), str(self.process.pid), *checker}

    def _still_clean(self) -> bool:
        """Whether the test left no process behind; if so, the next test's scratch is put in place."""
        while True:  # orphans of the test come to us: reap them, and remember that there were some
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False  # not even the series' process is left
            if pid == 0:
                break
            if pid != self.spare:
                return False
            self.spare = 0
        supervisors = self._supervisors()
        if any(name.isdigit() and name not in supervisors for name in os.listdir("/proc")):
            return False
        try:
            if not self.programs.seccomp and sysv_objects() != self.sysv:
                return False
            self.scratch.swap()
        except OSError:
            return False
        return True


def snapshot(directory: int) -> list[tuple[str, int, bytes]]:
    """The regular files of ``directory`` (names, modes, contents), as the agent wrote them."""
    files = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
                with open(fd, "rb") as f:
                    files.append((entry.name, os.fstat(fd).st_mode & 0o7777, f.read()))
    return files


def restore_files(files: list[tuple[str, int, bytes]]) -> None:
    for name, mode, data in files:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def serve_test_series(
    sock: socket.socket, cmd: RunCommand, programs: Programs, files_dir: int, first_fresh: bool
) -> NoReturn:
    """In a series' process: compile the program once, then fork a child for each test to run it in.

    This process never runs the program, and holds a test's descriptors only until its child has them. It
    keeps the supervisors' uid (with no capability but those to change ids, where programs have a uid of
    their own), so that no test may signal it, renice it, move it or change its limits, and is not
    dumpable, so that no test can trace it or read its memory. A test can at most kill it (where programs
    share its uid), which ends the series (see :class:`TestSeries`). Each test runs in the scratch directory
    the box made for it (with ``first_fresh``, the first too; else that one is the agent's), where its
    child first writes the program's files again, from the copy this process took in ``files_dir``.
    """
    try:
        detach(sock, files_dir, programs.cgroup.procs if programs.cgroup is not None else -1)
        on_own_cpu(programs)
        linux.set_dumpable(False)
        if programs.other_uid:
            os.setgroups([])
            linux.set_file_ids(programs.uid, programs.gid)  # the tests' files are theirs
            linux.drop_capabilities(keep=(linux.CAP_SETUID, linux.CAP_SETGID))
        else:
            linux.drop_capabilities()
        files = snapshot(files_dir)
        os.close(files_dir)  # holds no test's scratch directory
        os.environ.clear()
        os.environ.update(cmd["env"])
        # Where programs share this process's uid, it counts against their process limit.
        set_limits(cmd["limits"], programs.contained, 0 if programs.other_uid else 1, series=True)
        os.setpriority(os.PRIO_PROCESS, 0, PROGRAM_NICE)  # its tests' priority, which they take from here
        if programs.seccomp:
            linux.install_seccomp()
        else:
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        # What every test's process would otherwise do first is done here once: signal dispositions as the
        # interpreter sets them, the compile, the standard streams (made on a pipe, as a test's are).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        python = cmd["python"]
        if python is None:
            raise ValueError("a test series runs a Python program")
        name = os.path.relpath(python, cmd["cwd"])
        code, unparsed = pyrun.load(python, next((data for n, _, data in files if n == name), None))
        here, there = os.pipe()
        for fd in (0, 1, 2):
            os.dup2(there if fd else here, fd)
        os.close(here)
        os.close(there)
        pyrun.install_streams(pyrun.make_streams())  # this process never prints: its 0-2 are /dev/null below
        to_null()
    except BaseException as exc:
        try:
            sock.send(f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)
    # The assert runner's series: one checker for all its runs, and one process a run for the program.
    runner = assert_runner.ASSERT_MAIN.encode()
    is_runner = next((d for n, _, d in files if n == name), b"") == runner
    checker = start_checker(sock, cmd["cwd"]) if is_runner else None
    if is_runner:  # each run's checker writes the program's text by that name (``program_file``), never a request
        files = [f for f in files if f[0] != program_module.FILE]
    sock_fd = sock.fileno()
    limits, uid, gid = cmd["limits"], programs.uid, programs.gid
    restore = first_fresh

    def start_test() -> None:
        """In a test's process, first: its place, its files, its limits and the programs' uid."""
        try:
            os.close(sock_fd)
            if programs.cgroup is not None:
                programs.cgroup.join()  # the test's processes are its run's: every one in the run's cgroup
            os.setpgid(0, 0)  # a group of its own: kill(0) reaches the test's processes only
            os.chdir(cmd["cwd"])
            if restore:
                restore_files(files)
            # As few steps as can be (each costs the test's time: the first touch of a page of this
            # process copies it): the other limits and the priority come from the series' process.
            set_test_limits(limits)
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
        report: TestStatus | AssertStatus | BrokenStatus
        if checker is not None:
            report = assert_test(checker, fds, python, start_test)
        else:
            wire(fds)  # on this process's 0-2 until the fork: the child then has them where they belong
            pid = os.fork()
            if pid == 0:
                start_test()
                os._exit(pyrun.run_script(python, cmd["argv"][1:], code, streams_made=True))
            to_null()  # the test's output ends when its processes end, not when this one does
            _, status, usage = os.wait4(pid, 0)
            report = status_report(status, usage)
            if unparsed:  # this process's compile, before any of the program ran (see pyrun.load)
                report["unparsed"] = True
        restore = True
        sock.send(json.dumps(report).encode())
