"""A test series' checker, as the series' process starts and calls it (its own side: ``assert_checker.py``)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import NamedTuple

from . import assert_checker, assert_runner, linux
from .assert_outcome import outcome_status
from .box_protocol import AssertStatus, BrokenStatus, read_outcome
from .plain_channel import Channel
from .programs import status_report, to_null, wire


class CheckerProcess(NamedTuple):
    pid: int
    sock: socket.socket


def start_checker(sock: socket.socket, cwd: str) -> CheckerProcess:
    """Fork the series' checker (see ``assert_checker.serve_checker``): it keeps this process's uid, which
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
        assert_checker.serve_checker(there, cwd)
    there.close()
    return CheckerProcess(pid, here)


def assert_test(
    checker: CheckerProcess, fds: list[int], main: str, start_test: Callable[[], None]
) -> AssertStatus | BrokenStatus:
    """One assert run of the series: the checker gets its stdin and output, and a channel to the program's
    process, forked here; the verdict is theirs together (``assert_outcome.outcome_status``)."""
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
    wire([os.open(os.devnull, os.O_RDONLY), stdout, stderr])  # the program's process has no stdin
    pid = os.fork()
    if pid == 0:
        checker.sock.close()  # the checker's answers are this process's alone
        start_test()
        sys.argv = [os.path.basename(main)]  # as `python3 main.py` in its directory has it
        sys.path.insert(0, os.path.dirname(main))
        assert_runner.serve_program(Channel(program_reads, program_writes))
    os.close(program_reads)
    os.close(program_writes)
    to_null()  # the test's output ends when its processes end, not when this one does
    try:
        answer = read_outcome(checker.sock.recv(4096))
    except OSError:
        answer = None
    _, status, usage = os.wait4(pid, 0)
    if answer is None:
        # The program took the checker down (where it shares its uid): the agent runs this test again alone.
        return {"broken": True}
    code, sig = outcome_status(answer["outcome"], status)
    ended = status_report(status, usage, answer["cpu"])
    unparsed = answer["outcome"] == "unparsed"  # by the checker's own compile (assert_runner.Checker.take)
    return {
        **ended,
        "exit_code": code,
        "signal": sig,
        "supervisor": checker.pid,
        "retired": answer["retired"],
        "unparsed": unparsed,
    }
