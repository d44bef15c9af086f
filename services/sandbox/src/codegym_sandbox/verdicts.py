"""Per-test verdicts, and how a finished run maps to one."""

from __future__ import annotations

import signal
from enum import Enum


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
