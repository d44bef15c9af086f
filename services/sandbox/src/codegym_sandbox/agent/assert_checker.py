"""The checker of a test series: the assert runs of all its tests (see ``test_series.py``).

No test runs in the checker itself. The runs of one set of tests (one text: the n samples of a task) go to a
child of the checker that holds those tests compiled (:func:`_judge_tests`; the children of the last
:data:`JUDGES` sets are kept), and each run is judged in a fork of that child made for the run alone, which ends
with it. What a run's tests change of the process that runs them (the checker's own functions, ``builtins``, the
modules they import and their state, set from the program's values or by its code) ends with the run: it never
judges a later run, of the same tests or of others, of this request or of another client's. (A judge kept from
run to run, with watches of what a run could change, was tried first: a logger configured from one program's
dict made every later wrong program of those tests pass, through no watch.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from typing import NoReturn

from . import call_test, import_path, own_status, program_file, program_names
from .assert_runner import Checker, check_read
from .assert_stdin import read_bytes, split_stdin
from .kernel import reseed
from .plain_channel import Channel
from .run_cgroup import checker_children
from .test_forms import Asserts, Tests, read_tests

# The memory of its own (anonymous: the tests compiled, what their imports made) the children a checker keeps may
# hold together: they live in the worker's memory cgroup, whose margin above the runs' budget (64 MiB) is the box's
# and the series' too, so what idle children keep is bounded within half of it.
KEPT_KB = 32 << 10
# Sets of tests whose children a checker keeps: the runs of a few tasks come to a worker by turns.
JUDGES = 4
_ANSWER = 64  # a child's answer: the outcome, its CPU seconds, whether it ends, how much it grew (kB)
_STAYS = 0  # a run's fork's exit status: its judge goes on to the set's next run


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
    once, at the first run, here; each run is judged in a fork of this process made for it alone
    (:func:`_judge_run`), which ends with the run. So nothing a run's tests change of the process (a module's
    state, a logger set from the program's dict, the judge's own tables, whether the program's values or its
    code did it) judges a later run: keeping that state between runs was the reason, whatever the example
    (``logging.config.dictConfig`` of one program's dict made every later wrong program of those tests pass)."""
    guard = import_path.Guard(cwd, taint_fd)  # nothing the programs of its runs write runs here
    compiled: list[Tests] = []  # the set's tests, compiled at its first run
    start_kb, grown = own_status.status_kb("RssAnon:"), 0
    while True:
        stdin, *fds = _next_run(sock)
        before = os.times()
        try:
            data = read_bytes(stdin)
        finally:
            os.close(stdin)
        if not compiled:
            with contextlib.suppress(Exception):  # what fails here fails again in the run's fork, which says so
                tests = read_tests(split_stdin(data)[1])
                if not isinstance(tests, call_test.Call):
                    compiled.append(tests)  # a call test is read again for each run: a program changes its arguments
                    _import_ahead(tests)
            # What the set's later runs carry: its compiled tests, and the modules they import first.
            grown = max(own_status.status_kb("RssAnon:") - start_kb, 0)
        after = os.times()
        # The run's too: the tests read, compiled, and their first imports made (each later run's fork has them).
        read_s = after.user + after.system - before.user - before.system
        said, say = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            sock.close()  # the fork answers this process, which answers the checker once the fork is gone
            said.close()
            _judge_run(say, cwd, guard, (compiled, data, grown, read_s), fds)
        say.close()
        for fd in fds:
            os.close(fd)  # the run's output ends with its processes: nothing of it stays open here
        _, status = os.waitpid(pid, 0)
        # The answer only once the fork is reaped: the box ends a series where a process of the run is still there as
        # it ends (a fork still exiting was one, and the next run had a new checker, which compiled and imported the
        # tests again).
        try:
            answer = said.recv(_ANSWER, socket.MSG_DONTWAIT)
        except OSError:
            answer = b""
        said.close()
        if answer:
            with contextlib.suppress(OSError):
                sock.send(answer)
        # A run that answered nothing (its fork killed) ends the set; so does one that left a process here.
        if not answer or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != _STAYS or _children():
            os._exit(0)


def _import_ahead(tests: Asserts) -> None:
    """Import here, once for the set's runs, the modules the tests import before anything else of theirs runs
    (``program_names.leading_imports``): each run's fork finds them imported, and its time no longer pays for them
    (``import scipy.stats`` took most of a 1 s limit, in every run). Never the program's module, nor one off the
    judge's own path (this process's ``import_path.Guard`` refuses it); nothing of any run's is read: in the root
    directory, whose files no run writes, with the output of what they print dropped. They are imported in the
    tests' order, as the tests would import them with nothing of theirs run before; where one fails (and the tests'
    import then fails too), what it left is forgotten, and the run's fork imports it again and fails as it did."""
    with contextlib.suppress(OSError):
        os.chdir("/")
    for name, names in program_names.leading_imports(tests.code):
        before = set(sys.modules)
        try:
            __import__(name, None, None, names, 0)
        except BaseException:
            for added in sys.modules.keys() - before:
                del sys.modules[added]
            break
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _judge_run(
    sock: socket.socket, cwd: str, guard: import_path.Guard, run: tuple[list[Tests], bytes, int, float], fds: list[int]
) -> NoReturn:
    """One run of the set's tests (``run``: the tests compiled, the run's stdin, what the judge grew), in a fork of
    its judge that ends with it: the answer to the checker (on ``sock``, through the judge), and an exit that tells
    the judge whether the set's later runs may go on (:data:`_STAYS`)."""
    compiled, data, grown, read_s = run
    code = 1
    try:
        stdout, stderr, reads, writes = fds
        guard.begin_run()
        reseed()  # numpy's generator, where the tests' first imports made it here: each run draws its own
        os.chdir(cwd)  # no scratch directory (OSError): the series cannot go on
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.close(stdout)
        os.close(stderr)
        checker = Checker(Channel(reads, writes))

        def read() -> Tests:
            source, text = split_stdin(data)
            program_file.lay_out(source)  # before the program's process has the program
            checker.take(source)
            # From here, other code taints, and the program's text compiles no more.
            return guard.armed_for(compiled[0] if compiled else read_tests(text), source)

        outcome = check_read(checker, read)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        after = os.times()
        cpu = read_s + after.user + after.system  # this fork's whole life: the checker's time, not the program's
        # Whether the set's later runs go on in new forks of the judge: not once a program made it import a module
        # (no program may change how a later run is judged, nor how fast), nor where the tests left something
        # running (a thread or a timer would end with this fork; a process would not).
        ends = checker.imported or _left_running()
        sock.send(f"{outcome} {cpu:.6f} {'ends' if ends else 'stays'} {grown}".encode())
        code = 1 if ends else _STAYS
    finally:
        os._exit(code)
