"""The checker of a test series: the assert runs of all its tests (see ``test_series.py``).

No test runs in the checker itself. The runs of one set of tests (one text: the n samples of a task) are
judged by a child of the checker that judges those tests alone (:func:`_judge_tests`; the children of the
last :data:`JUDGES` sets are kept), and another text gets another child: what a run's tests change of the
process that runs them (the checker's own functions, ``builtins``, the modules they import) stays with tests
of their own text, which do the same in each of their runs, and never judges tests of another text, of this
request or of another client's (tests that patched ``call_test.values_match`` once passed every later run of
their worker). A fork per set of tests, not per run: a fork (and the pages a new process copies as it runs)
per run cost HumanEval's samples 40% of their throughput.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import warnings
from typing import NoReturn

from . import call_test, checker_wire, import_path
from .assert_runner import Checker, check_read
from .assert_stdin import read_bytes, split_stdin
from .plain_data import Channel
from .run_cgroup import checker_children
from .test_forms import Tests, read_tests

# How much more memory of its own (anonymous: the tests' values, what programs sent it, not the files of modules it
# shares) a judge may hold after a run than it started with, and all the judges a checker keeps together: they live
# in the worker's memory cgroup, whose margin above the runs' budget (64 MiB) is the box's and the series' too, so
# what idle judges keep is bounded within half of it. Past it, a judge ends: what a program left in one is never
# the memory of a later run (another client's) of the same worker.
RETIRE_KB = 16 << 10
KEPT_KB = 32 << 10
_TRIM_KB = 2 << 10  # a judge that grew past this gives back what it freed before it is measured
# Sets of tests whose children a checker keeps: the runs of a few tasks come to a worker by turns.
JUDGES = 4
_ANSWER = 64  # a child's answer: the outcome, its CPU seconds, whether it ends, how much it grew (kB)


def _own_kb() -> int:
    """This process's anonymous resident memory, in kB (0 where the kernel does not say)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _give_back() -> None:
    """What the judge freed, back to the system: cycles collected, and the free pages of the C heap (glibc's
    ``malloc_trim``), where a program's large values, once freed, otherwise stay resident."""
    gc.collect()
    try:
        import ctypes  # in a judge alone, never in the agent that programs are forked from

        ctypes.CDLL(None).malloc_trim(0)
    except (ImportError, OSError, AttributeError):  # no glibc (musl has no malloc_trim): what gc gave back
        pass


def _tests_text(stdin: bytes) -> str | None:
    try:
        return split_stdin(stdin)[1]
    except ValueError:
        return None  # no tests: the run's child says so, with its traceback


class _Judge:
    """A child of the checker that judges the runs of one set of tests, one at a time."""

    def __init__(self, text: str | None, cwd: str, series: socket.socket, held: list[int]) -> None:
        self.text = text
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.taint, taint_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # see import_path.Guard
        self.pid = os.fork()
        if self.pid == 0:
            series.close()  # the series' process hears the checker alone, never a run's tests
            here.close()
            os.close(self.taint)
            for fd in held:  # the run's (it gets them again from the checker: a copy kept would keep the
                os.close(fd)  # program's process waiting for the end of its channel) and other children's
            _judge_tests(there, cwd, taint_w)
        there.close()
        os.close(taint_w)
        self.sock = here
        self.grown = 0  # kB more than it started with, after its last run

    def tainted(self) -> bool:
        """Whether code of the program's ran in the judge (a byte it cannot take back: ``import_path.Guard``)."""
        try:
            return bool(os.read(self.taint, 64))
        except BlockingIOError:
            return False
        except OSError:
            return True

    def run(self, stdin: bytes, fds: list[int]) -> bytes:
        """One run: its stdin through a pipe, its output and channel as descriptors; the child's answer."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)  # where programs share its uid, one may have stopped it
        read_end, write_end = os.pipe()
        try:
            socket.send_fds(self.sock, [b"run"], [read_end, *fds])
        except OSError:
            return b""  # the child is gone: seen by the caller
        finally:
            os.close(read_end)
        try:
            view = memoryview(stdin)
            while view:
                view = view[os.write(write_end, view) :]
        except OSError:
            return b""
        finally:
            os.close(write_end)
        try:
            return self.sock.recv(_ANSWER)
        except OSError:
            return b""

    def end(self) -> None:
        self.sock.close()  # the child ends when its socket does
        os.close(self.taint)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def serve_checker(sock: socket.socket, cwd: str) -> NoReturn:
    """The checker of a test series, forked by the series' process before its first run, for all of them.

    For each run the series' process sends the run's stdin, stdout and stderr and the checker's ends of a
    channel to that run's program's process (which it forks); the checker reads the program and the tests and
    hands the run to the child that judges those tests (a new one when they are not the last run's), which
    sends the program with the names the tests want, runs the tests and answers the outcome of :func:`check`.
    """
    checker_wire.warm()  # before any judge is forked
    judges: dict[str | None, _Judge] = {}  # by the text of their tests, the most recent last
    while True:
        fds = _next_run(sock)
        try:
            stdin = read_bytes(fds[0])
        finally:
            os.close(fds[0])
        text = _tests_text(stdin)
        # A new child holds nothing but its own: a copy of another's socket would keep that one from its end.
        held = [*fds[1:], *(fd for j in judges.values() if j.text != text for fd in (j.sock.fileno(), j.taint))]
        judge = judges.pop(text, None) or _Judge(text, cwd, sock, held)
        judges[text] = judge
        while len(judges) > JUDGES:
            judges.pop(next(iter(judges))).end()
        answer = judge.run(stdin, fds[1:])
        for fd in fds[1:]:
            os.close(fd)  # the run's output ends with its processes: nothing of it stays open here
        try:
            outcome, cpu, ends, grown = answer.decode().split()
            float(cpu)
            judge.grown = int(grown)
        except ValueError:
            os._exit(1)  # the child died before it answered: the series cannot go on
        if ends == "ends" or judge.tainted():  # a judge where the program's code ran judges no later run
            judges.pop(text).end()
        while sum(j.grown for j in judges.values()) > KEPT_KB:  # the judges kept hold no more than that together
            judges.pop(max(judges, key=lambda t: judges[t].grown)).end()
        # A process the tests made a child of the checker itself (clone's CLONE_PARENT) is no judge: the series
        # ends with this run, and everything of it with the series.
        strays = set(_children()) - {str(j.pid) for j in judges.values()}
        try:
            sock.send(f'{{"outcome":"{outcome}","cpu":{cpu},"retired":{"true" if strays else "false"}}}'.encode())
        except OSError:
            os._exit(0)
        if strays:
            os._exit(0)


def _next_run(sock: socket.socket) -> list[int]:
    """A run's five descriptors (stdin, stdout, stderr, the channel's two ends), from the process that sends runs
    here (the series' process to the checker, the checker to a judge); this process ends when it went away."""
    try:
        msg, fds, _, _ = socket.recv_fds(sock, 64, 5)
    except OSError:
        os._exit(0)
    if not msg or len(fds) != 5:
        os._exit(0)
    return fds


def _children() -> list[str]:
    return checker_children(str(os.getpid()))  # this process has one thread


def _left_running() -> bool:
    """Whether a run's tests left a thread, a process or an armed timer in this child."""
    timers = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return True
    return threads > 1 or bool(_children()) or any(signal.getitimer(t)[0] for t in timers)


def _judge_tests(sock: socket.socket, cwd: str, taint_fd: int) -> NoReturn:
    """The child that judges one set of tests: each run's, until the checker hangs up. The tests are compiled
    once; each run's get a scope of their own, and what they change of ``sys`` (streams, the recursion limit)
    is put back. They run in ``cwd``, the run's scratch directory (a new one for every run), as they would
    beside the program."""
    guard = import_path.Guard(cwd, taint_fd)  # nothing the programs of its runs write runs here
    compiled: list[Tests] = []  # the set's tests, compiled at its first run
    saved = (sys.stdin, sys.stdout, sys.stderr, sys.getrecursionlimit())
    # What else of the process a run's tests may set (from the program's values too) and a later run would find.
    environ, filters, path = dict(os.environ), list(warnings.filters), list(sys.path)
    start_kb = _own_kb()
    null = os.open(os.devnull, os.O_RDWR)
    while True:
        stdin, stdout, stderr, reads, writes = _next_run(sock)
        guard.begin_run()
        try:
            os.chdir(cwd)
        except OSError:
            os._exit(1)  # no scratch directory: the series cannot go on
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.close(stdout)
        os.close(stderr)
        before = os.times()
        checker = Checker(Channel(reads, writes))

        def read(checker: Checker = checker, stdin: int = stdin) -> Tests:
            source, text = split_stdin(read_bytes(stdin))
            checker.take(source)
            if compiled:
                return compiled[0]  # every run of this child has the same tests
            tests = read_tests(text)
            if not isinstance(tests, call_test.Call):
                compiled.append(tests)  # a call test is read again for each run: a program changes its arguments
            return guard.armed_for(tests)  # from here on, code that is not the tests' taints

        try:
            outcome = check_read(checker, read)
        finally:
            os.close(stdin)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        sys.setrecursionlimit(saved[3])
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        warnings.filters[:] = filters  # type: ignore[index]  # a list, which typeshed calls a Sequence
        sys.path[:] = path
        os.dup2(null, 1)  # the run's output ends with its processes: nothing of it stays open here
        os.dup2(null, 2)
        os.chdir("/")  # nor its scratch directory
        after = os.times()
        cpu = after.user + after.system - before.user - before.system
        # What the set's later runs would carry: once this child holds much more than it started with (the
        # tests imported a large package, a program sent it large values) it ends, and the next run of its
        # tests gets a new one. So it does once a program made it import a module (no program may change how
        # a later run is judged, nor how fast), and once the tests left something running here: a thread, a
        # process or a timer would run on beside other tests' runs (another client's), in their time and their
        # scratch directory. The checker waits for its end before it answers.
        grown = _own_kb() - start_kb
        if grown > _TRIM_KB:
            _give_back()
            grown = _own_kb() - start_kb
        ends = checker.imported or grown > RETIRE_KB or _left_running() or not guard.intact()
        try:
            sock.send(f"{outcome} {cpu:.6f} {'ends' if ends else 'stays'} {max(grown, 0)}".encode())
        except OSError:
            os._exit(0)
        if ends:
            os._exit(0)
