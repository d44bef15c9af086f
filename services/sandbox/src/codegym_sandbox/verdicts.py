"""Verdicts, how a run ends, and the one mapping of a finished process to how it ended.

A low-level module that every layer may import: the wire models name a :class:`Verdict`; the executor gives
each step the :class:`RunEnd` of :func:`run_end` (so that it caches, counts and answers it), and the judge
(``judging/``) decides a test's and a program's verdict from it. A run's end is no verdict: a run that exited
0 has passed no test by that. It sits under the executor, not in ``judging/``, because the executor needs it
and may not import the layer above it.
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


class RunEnd(str, Enum):
    """How one process ended, before any test judges it. Its verdict (:attr:`verdict`) is a run's own where no
    test judges it (a compile step, ``/v1/execute``); a test's verdict is the judge's (``judging/judge.py``)."""

    EXITED = "exited"  # it ran to its end and exited 0: what it printed or returned is for a test to judge
    FAILED = "failed"  # it exited non-zero, or a signal of its own ended it: RE
    TIME_LIMIT = "time_limit"  # TLE
    MEMORY_LIMIT = "memory_limit"  # MLE
    OUTPUT_LIMIT = "output_limit"  # OLE
    COMPILE_ERROR = "compile_error"  # its compile failed, or its Python source did not parse: CE
    SANDBOX_ERROR = "sandbox_error"  # the sandbox failed, not the program: SE

    @property
    def verdict(self) -> Verdict:
        """The verdict of a run that no test judges: AC when it exited 0."""
        return _VERDICTS[self]


_VERDICTS = {
    RunEnd.EXITED: Verdict.AC,
    RunEnd.FAILED: Verdict.RE,
    RunEnd.TIME_LIMIT: Verdict.TLE,
    RunEnd.MEMORY_LIMIT: Verdict.MLE,
    RunEnd.OUTPUT_LIMIT: Verdict.OLE,
    RunEnd.COMPILE_ERROR: Verdict.CE,
    RunEnd.SANDBOX_ERROR: Verdict.SE,
}

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


def run_end(
    out: RunOutcome,
    memory: bool,
    own_file: bool,
    *,
    compile_step: bool = False,
    no_program: bool = False,
    python: bool = False,
) -> RunEnd:
    """How one finished process ended, before any test judges its output.

    ``memory``: it ran out of memory (:func:`memory_exceeded`). ``own_file``: it executed a file of the
    program's own, its compiled executable, not a tool of the sandbox's (a compiler, an interpreter).
    ``compile_step``: it was a compile, which failed (CE) unless it ran out of time or the sandbox failed,
    or exited 0 with ``no_program``: what it made cannot run (see ``languages.unrunnable``). ``python``: it
    ran a Python program's source, whose SyntaxError is a compile error, not a runtime one.

    A run is CE only where the sandbox's side found, before any of the program ran, that the source does not
    compile (``RunOutcome.unparsed``: the run's process, a test series' process, or an assert run's checker,
    each by its own compile): a program that prints a SyntaxError and exits 1 is RE (under the ``execution``
    reward, -1.0 and not CE's -0.5), and so is one whose tests raise a SyntaxError (``ast.parse`` of what it
    returned). A marker of memory in what it printed (a bad line that says ``MemoryError``) never beats it.
    """
    end = _ended(out, memory, own_file)
    if compile_step:
        if end is RunEnd.EXITED and not no_program:
            return RunEnd.EXITED
        return end if end in (RunEnd.SANDBOX_ERROR, RunEnd.TIME_LIMIT) else RunEnd.COMPILE_ERROR
    if python and out.unparsed and end in (RunEnd.FAILED, RunEnd.MEMORY_LIMIT):  # the memory limit by a marker too
        return RunEnd.COMPILE_ERROR
    return end


def _ended(out: RunOutcome, memory: bool, own_file: bool) -> RunEnd:
    """How the process ended: the sandbox's failure, a limit it hit, or its exit status."""
    if out.launch_error:
        # The box could not start the process: the sandbox failed, unless the kernel found the program's own
        # file no executable (a library, a broken one). That is the program's doing, as a shell would
        # report it; a tool that will not start is the sandbox's.
        found = _ERRNO.search(out.launch_error) if out.launch_error.startswith(EXEC_FAILED) else None
        theirs = own_file and found is not None and int(found.group(1)) in _NOT_EXECUTABLE
        return RunEnd.FAILED if theirs else RunEnd.SANDBOX_ERROR
    if out.output_exceeded:
        return RunEnd.OUTPUT_LIMIT
    if out.timed_out or out.signal == signal.SIGXCPU:  # the CPU-time limit
        return RunEnd.TIME_LIMIT
    if memory:
        return RunEnd.MEMORY_LIMIT
    return RunEnd.EXITED if out.exit_code == 0 else RunEnd.FAILED
