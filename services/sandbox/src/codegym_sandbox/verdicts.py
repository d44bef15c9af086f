"""Verdicts, and the one mapping of a finished run to its verdict.

A low-level module that every layer may import: the wire models name a :class:`Verdict`, the executor gives
each step the verdict of :func:`run_verdict` (so that it caches, counts and answers it), and the judge
(``judging/``) decides a test's and a program's verdict from it. It sits under the executor, not in
``judging/``, because the executor needs it and may not import the layer above it.
"""

from __future__ import annotations

import errno
import re
import signal
from enum import Enum

from .agent.protocol import EXEC_FAILED
from .backends.base import RunOutcome


class Verdict(str, Enum):
    AC = "AC"  # accepted
    WA = "WA"  # wrong answer
    TLE = "TLE"  # time limit
    MLE = "MLE"  # memory limit
    RE = "RE"  # runtime error
    CE = "CE"  # compile or syntax error
    OLE = "OLE"  # output limit
    SE = "SE"  # sandbox error: infrastructure, never the program's fault

    # A verdict reads as it is on the wire ("AC", not "Verdict.AC") in every Python, wherever it is printed,
    # logged or made part of a name (a metric's, a report's), so that its callers hold the enum, not its string.
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# What runtimes print when an allocation fails under the address-space limit.
_OOM_MARKERS = (b"MemoryError", b"std::bad_alloc", b"OutOfMemoryError", b"heap out of memory", b"memory allocation of")


def memory_exceeded(stderr: bytes, exit_code: int | None, sig: int | None, rss_kb: int | None, limit_mb: int) -> bool:
    """Whether a failed run ran out of memory rather than failing on its own."""
    if exit_code == 0:
        return False
    tail = stderr[-4096:]
    if any(m in tail for m in _OOM_MARKERS):
        return True
    return sig == signal.SIGKILL and rss_kb is not None and rss_kb >= limit_mb * 1024 * 0.9


# Why the kernel refuses to execute a file that is the file's own doing: not an executable format (a library),
# or an interpreter that it names and that is not there, or that is not one. The compile that made the file
# ran the toolchain, and so the usual interpreter, in the same box. Everything else (EACCES: a file the server
# checked to be executable, on a mount that forbids it; EPERM, ENOMEM, EAGAIN, ...) is the sandbox's.
_NOT_EXECUTABLE = frozenset({errno.ENOEXEC, errno.ENOENT, errno.ELIBBAD, errno.EINVAL})
_ERRNO = re.compile(r"\[Errno (\d+)\]")  # how an OSError reads, as the box reports a failed execve


def run_verdict(
    out: RunOutcome,
    memory: bool,
    own_file: bool,
    *,
    compile_step: bool = False,
    no_program: bool = False,
    python: bool = False,
) -> Verdict:
    """The verdict of one finished process before any test judges its output (AC: it ran and exited 0).

    ``memory``: it ran out of memory (:func:`memory_exceeded`). ``own_file``: it executed a file of the
    program's own, its compiled executable, not a tool of the sandbox's (a compiler, an interpreter).
    ``compile_step``: it was a compile, which failed (CE) unless it ran out of time or the sandbox failed,
    or exited 0 with ``no_program``: what it made cannot run (see ``languages.unrunnable``). ``python``: it
    ran a Python program's source, whose SyntaxError is a compile error, not a runtime one.
    """
    verdict = _ended(out, memory, own_file)
    if compile_step:
        if verdict is Verdict.AC and not no_program:
            return Verdict.AC
        return verdict if verdict in (Verdict.SE, Verdict.TLE) else Verdict.CE
    if python and verdict is Verdict.RE and _is_syntax_error(out.stderr):
        return Verdict.CE
    return verdict


def _is_syntax_error(stderr: bytes) -> bool:
    last = stderr.rstrip().rsplit(b"\n", 1)[-1]
    return last.startswith((b"SyntaxError", b"IndentationError", b"TabError"))


def _ended(out: RunOutcome, memory: bool, own_file: bool) -> Verdict:
    """How the process ended: the sandbox's failure, a limit it hit, or its exit status."""
    if out.launch_error:
        # The box could not start the process: the sandbox failed, unless the kernel found the program's own
        # file no executable (a library, a broken one). That is the program's doing, as a shell would
        # report it; a tool that will not start is the sandbox's.
        found = _ERRNO.search(out.launch_error) if out.launch_error.startswith(EXEC_FAILED) else None
        theirs = own_file and found is not None and int(found.group(1)) in _NOT_EXECUTABLE
        return Verdict.RE if theirs else Verdict.SE
    if out.output_exceeded:
        return Verdict.OLE
    if out.timed_out or out.signal == signal.SIGXCPU:  # the CPU-time limit
        return Verdict.TLE
    if memory:
        return Verdict.MLE
    return Verdict.AC if out.exit_code == 0 else Verdict.RE
