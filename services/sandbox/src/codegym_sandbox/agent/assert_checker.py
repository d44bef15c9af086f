"""The checker of a test series: one process for the assert runs of all its tests (see ``test_series.py``)."""

from __future__ import annotations

import os
import socket
import sys
from typing import NoReturn

from .assert_runner import Checker, Tests, check_read, read_bytes, read_tests, split_stdin
from .plain_data import Channel

RETIRE_KB = 32 << 10  # how much more a series' checker may hold than it started with


def _resident_kb() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


class _Compiled:
    """The last tests read, by their text: n samples of a task share theirs (as do its programs)."""

    SIZE = 64

    def __init__(self) -> None:
        self.codes: dict[str, Tests] = {}

    def get(self, text: str) -> Tests:
        code = self.codes.pop(text, None)
        if code is None:
            code = read_tests(text)
        self.codes[text] = code  # the most recent last
        while len(self.codes) > self.SIZE:
            del self.codes[next(iter(self.codes))]
        return code


def serve_checker(sock: socket.socket, cwd: str) -> NoReturn:
    """The checker of a test series, forked by the series' process before its first run, for all of them.

    For each run the series' process sends the run's stdin, stdout and stderr and the checker's ends of
    a channel to that run's program's process (which it forks); the checker reads the program and the
    tests, sends the program with the names the tests want, runs the tests, answers the outcome of
    :func:`check` and gives every descriptor of the run up. Each run's tests get a scope of their own, and
    what they change of ``sys`` (streams, the recursion limit) is put back. They run in ``cwd``, the run's
    scratch directory (a new one for every run), as they would beside the program.
    """
    compiled = _Compiled()
    saved = (sys.stdin, sys.stdout, sys.stderr, sys.getrecursionlimit())
    start_kb = _resident_kb()
    null = os.open(os.devnull, os.O_RDWR)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 5)
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 5:
            os._exit(0)  # the series' process went away
        stdin, stdout, stderr, reads, writes = fds
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

        def tests(checker: Checker = checker, stdin: int = stdin) -> Tests:
            source, text = split_stdin(read_bytes(stdin))
            checker.take(source)
            return compiled.get(text)

        try:
            outcome = check_read(checker, tests)
        finally:
            os.close(stdin)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        sys.setrecursionlimit(saved[3])
        os.dup2(null, 1)  # the run's output ends with its processes: nothing of it stays open here
        os.dup2(null, 2)
        os.chdir("/")  # nor its scratch directory
        after = os.times()
        cpu = after.user + after.system - before.user - before.system
        # What the series' later runs would carry: the checker is no run's process (its memory counts
        # against none), so once it holds much more than it started with (the tests imported a large
        # package, a program sent it large values) it ends, and its series with it. So it does once a
        # program made it import a module: no program may change how a later run is judged (nor how fast).
        retired = checker.imported or _resident_kb() > start_kb + RETIRE_KB
        try:
            sock.send(f'{{"outcome":"{outcome}","cpu":{cpu:.6f},"retired":{str(retired).lower()}}}'.encode())
        except OSError:
            os._exit(0)
        if retired:
            os._exit(0)
