"""One program run as the agent watches it: what it was given and gave back, and its deadline, which moves on
by the time its processes waited for a CPU that others held and by the time the server held it paused.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from . import run_cpu
from .protocol import WAIT_CREDIT

if TYPE_CHECKING:
    from .box_handle import BoxHandle
    from .protocol import RunFrame

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Run:
    """One program run: the pipes, the deadline and what came back."""

    def __init__(self, req: RunFrame, blobs: list[bytearray]) -> None:
        self.req = req
        limits = req["limits"]
        self.started = time.monotonic()
        self.clock = run_cpu.machine_clock()  # how busy the machine was by then: see stretched
        self.used_zero: float | None = None  # the kernel's count of the runs' CPU time by then: see stretched
        self.deadline = self.started + limits["wall_s"]
        self.output_cap = limits["output_bytes"]
        stdin_index = req.get("stdin")
        self.stdin = memoryview(blobs[stdin_index]) if stdin_index is not None else memoryview(b"")
        self.out: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.timed_out = False
        self.output_exceeded = False
        self.dropped = 0  # output read past the cap, and not kept
        self.killed_at: float | None = None
        self.paused_s = 0.0  # the time it stood paused by the server (run_pause.py): its deadline moves on by it


def stretched(bx: BoxHandle, run: Run, now: float, plain: bool) -> float:
    """The run's deadline, moved on by the time its processes waited for a CPU that other processes held (up
    to WAIT_CREDIT times its limit): a run's wall time stretches when more runs than CPUs compute at once (the
    pool lends slots to runs that sleep, and they may compute after all), and that must not turn a right
    answer into a time-out. CPU time stays limited as it was (the box counts it over all the run's processes), so
    waiting is all the credit buys; waits the run made itself buy nothing (see ``run_cpu.waited_for_others``).
    Read only at the deadline, so runs that end in time pay nothing for it but one read as they start.
    """
    limit = float(run.req["limits"]["wall_s"])
    started_ticks = (time.clock_gettime(time.CLOCK_BOOTTIME) - (now - run.started)) * _CLOCK_TICKS - 1
    used = run_cpu.runs_used_s(bx.config.get("run_cgroup"), bx.pid)  # by the kernel's count, where there is one
    waited = run_cpu.waited_for_others(bx.pid, started_ticks, plain, run.clock, used and used - (run.used_zero or 0))
    return run.started + run.paused_s + limit + min(waited, WAIT_CREDIT * limit)
