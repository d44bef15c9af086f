"""Per-test verdicts, and how a finished run maps to one."""

from __future__ import annotations

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


def run_verdict(out: RunOutcome, memory: bool, own_file: bool) -> Verdict:
    """The verdict of one finished process before any test judges its output (AC: it exited 0).

    ``memory``: it ran out of memory (:func:`memory_exceeded`). ``own_file``: it executed a file of the
    program's own, its compiled executable, not a tool of the sandbox's (a compiler, an interpreter).
    """
    if out.launch_error:
        # The box could not start the process: the sandbox failed, unless the kernel refused to execute the
        # program's own file (ENOEXEC, EACCES, ENOENT of a library or a broken executable). That is the
        # program's doing, as a shell would report it; a tool that will not start is the sandbox's.
        return Verdict.RE if own_file and out.launch_error.startswith(EXEC_FAILED) else Verdict.SE
    if out.output_exceeded:
        return Verdict.OLE
    if out.timed_out or out.signal == signal.SIGXCPU:  # the CPU-time limit
        return Verdict.TLE
    if memory:
        return Verdict.MLE
    return Verdict.AC if out.exit_code == 0 else Verdict.RE
