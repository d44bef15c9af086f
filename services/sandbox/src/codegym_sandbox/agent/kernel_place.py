"""Where a session's kernel lives, as its agent (``session.py``) watches it: a box, or a copy of its own.

A session's first kernel is the run of a box (:class:`BoxPlace`): the box reports how the run ended, its
processes are those of the box's pid namespace, and ending the session takes the box down. A kernel copied
from another (``kernel_copy.py``) is no box's run (:class:`CopyPlace`): it is watched through a pidfd, its
processes are those of its memory cgroup (which none may leave), its memory and CPU are counted in cgroups of
its own, and ending it kills every process of that cgroup.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING, Protocol

from . import run_cpu, session_pause
from .box_protocol import read_run_report
from .memory_cgroup import MemoryCgroup

if TYPE_CHECKING:
    from .box_handle import BoxHandle
    from .pids_cgroup import PidsCgroup
    from .protocol import Report
    from .run_cgroup import RunCgroup

_FOUND_S = 2.0  # how long a box has to start its kernel once the first cell is sent, at worst
_END_S = 5.0  # how long a copy killed has to be seen gone
_END_ROUNDS = 5
_CPU_POLL_S = 0.05  # as often as a box sums its run's


class KernelPlace(Protocol):
    root: int  # the process whose namespace's processes are the session's (stopped between cells)
    poll_s: float  # how often a cell's supervision looks at :meth:`ran_out`
    meter: RunCgroup | None  # the count of the session's CPU time
    memory: MemoryCgroup | None  # where the kernel kills the session's processes for memory

    def reports(self) -> int:
        """A descriptor that is readable once the kernel's run has ended."""
        ...

    def read_report(self) -> Report:
        """How it ended (once :meth:`reports` is readable)."""
        ...

    def find_kernel(self) -> int: ...

    def others(self) -> set[int]:
        """Every process of the session but its kernel."""
        ...

    def used_s(self) -> float:
        """The CPU time of the session so far (its copies' lives go on from it)."""
        ...

    def ran_out(self) -> Report | None:
        """How it ended where the session's CPU time over its life ran out and nothing else ended it (None: it
        did not, or its box ends it)."""
        ...

    def stop(self) -> bool: ...

    def resume(self) -> None: ...

    def end(self) -> None:
        """Take down the kernel and every process of the session."""
        ...


class BoxPlace:
    """A kernel that is its box's run."""

    def __init__(self, bx: BoxHandle) -> None:
        self.bx = bx
        self.root = bx.pid
        self.poll_s = float("inf")
        self.meter = bx.config.get("run_cgroup")
        # Where its processes are killed for memory: the worker's memory cgroup, or a container's own (one
        # session's). A kill is the session's passing its limit, whichever process the kernel chose.
        self.memory = bx.config.get("memory_cgroup") or MemoryCgroup.own()
        self.kernel = 0

    def reports(self) -> int:
        assert self.bx.ctl is not None
        return self.bx.ctl.fileno()

    def read_report(self) -> Report:
        assert self.bx.ctl is not None
        raw = self.bx.ctl.recv(1 << 16)
        if not raw:
            raise OSError("the box went away")
        return read_run_report(raw)

    def find_kernel(self) -> int:
        """The box's oldest child (what a cell leaves behind comes to the box later)."""
        waited = time.monotonic() + _FOUND_S
        while not self.kernel:
            self.kernel = session_pause.oldest_child(self.bx.pid)
            if self.kernel or time.monotonic() > waited:
                break
            time.sleep(0.001)
        return self.kernel

    def others(self) -> set[int]:
        return session_pause.descendants(self.root) - {self.find_kernel()}  # its orphans come to the box

    def used_s(self) -> float:
        return run_cpu.runs_used_s(self.meter, self.root) or 0.0

    def ran_out(self) -> Report | None:
        return None  # the box stops a run past its CPU time, and reports it

    def stop(self) -> bool:
        return session_pause.stop(self.root)

    def resume(self) -> None:
        session_pause.resume(self.root)

    def end(self) -> None:
        self.bx.respawn()
        self.bx.dirty = False  # a fresh box: nothing of the session is left in it


class CopyPlace:
    """A kernel copied from another: the reaper of its own processes, in cgroups of its own, with the CPU time of
    the session's life (``limit_s``) of which its parent had used ``spent_s``."""

    def __init__(
        self,
        pid: int,
        memory: MemoryCgroup | None,
        meter: RunCgroup | None,
        limit_s: float,
        spent_s: float,
        pids: PidsCgroup | None = None,
    ) -> None:
        self.root = self.kernel = pid
        self.memory, self.meter, self.pids = memory, meter, pids
        self.limit_s, self.spent_s = limit_s, spent_s
        self.poll_s = _CPU_POLL_S
        self.pidfd = os.pidfd_open(pid)

    def reports(self) -> int:
        return self.pidfd

    def read_report(self) -> Report:
        """Its wait status, its zombie's (read as it ends, before its box reaps it; a kill where it is gone)."""
        status = int(signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{self.kernel}/stat", "rb") as f:
            status = int(f.read().rsplit(b")", 1)[1].split()[49])  # exit_code, the 52nd field
        code, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
        return {"exit_code": code, "signal": sig, "wall": 0.0, "cpu": None, "max_rss_kb": None, "error": None}

    def find_kernel(self) -> int:
        return self.kernel

    def members(self) -> set[int]:
        """Every process of it: its memory cgroup's (which every process it starts is in, and none may leave),
        wherever a process's parent ends (its kernel gone, its orphans go to its box); its tree without one."""
        if self.memory is None:
            return {self.kernel, *session_pause.descendants(self.kernel)}
        return self.memory.pids()

    def others(self) -> set[int]:
        return self.members() - {self.kernel}

    def used_s(self) -> float:
        return self.spent_s + (self.meter.cpu_s() if self.meter is not None else 0.0)

    def ran_out(self) -> Report | None:
        if self.meter is None or self.used_s() <= self.limit_s:
            return None
        return {
            "exit_code": None,
            "signal": signal.SIGXCPU,
            "wall": 0.0,
            "cpu": None,
            "max_rss_kb": None,
            "error": None,
        }

    def stop(self) -> bool:
        return session_pause.stop(self.root, self.members)

    def resume(self) -> None:
        session_pause.resume(self.root, self.members)

    def end(self) -> None:
        """Kill it and every process of it (each stopped first, so that none forks on meanwhile), until none is
        left. Its cgroups go once they are empty."""
        select.select([self.pidfd], [], [], 0)
        for _ in range(_END_ROUNDS):
            session_pause.stop(self.root, self.members)
            for pid in self.members():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            waited = time.monotonic() + _END_S
            while self.members() and time.monotonic() < waited:
                time.sleep(0.005)
            if not self.members():
                break
        os.close(self.pidfd)
        self.pidfd = -1
        for group in (self.meter, self.pids, self.memory):
            if group is not None:
                group.remove()


def why_ended(report: Report | None) -> str:
    """Why the kernel stopped answering, by how its run ended (``report``; None: it is still there)."""
    if report is None:
        return "the kernel closed its channel (it ran another program, or gave the channel away)"
    if report["signal"] is not None:
        return f"the kernel was killed by signal {report['signal']}"
    return f"the kernel exited with status {report['exit_code']}"
