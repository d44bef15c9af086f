"""A run's memory: what its processes and its files hold, summed while it runs, against its budget."""

from __future__ import annotations

import os
import select
import time

from . import isolation, run_cpu, vfork_wait
from .memory_cgroup import MemoryCgroup
from .programs import kill_all

MEMORY_CHECK_MS = 50  # how often the memory of a whole run is summed while it runs


def scratch_files_kb() -> int:
    """What the files of a run hold in memory: the tmpfs of its scratch directory and of ``/dev/shm``."""
    total = 0
    for path in (isolation.SCRATCH, isolation.SHM):
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        total += (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    return total


class Held:
    """What a run holds beyond its processes' own memory, above what it holds as it starts: files (a tmpfs
    is memory), and kernel memory (socket and pipe buffers, page tables, inodes) where a memory cgroup
    counts it."""

    def __init__(self, memory: MemoryCgroup | None, files_kb: int | None = None, checker: str | None = None) -> None:
        self.memory = memory
        self.files_kb = scratch_files_kb() if files_kb is None else files_kb
        self.kernel_kb = memory.kernel_kb() if memory is not None else 0
        # A series' checker is no run's process: what it holds (modules the tests imported, for one) stays
        # for the series' later runs, and what a run makes it hold is bounded by its own address-space
        # limit, the run's (see assert_checker.serve_checker, which ends its series when it has grown).
        self.checker = checker

    def now_kb(self) -> int:
        held = max(0, scratch_files_kb() - self.files_kb)
        if self.memory is not None:
            held += max(0, self.memory.kernel_kb() - self.kernel_kb)
        return held


def held_at_end(held: Held, max_rss_kb: int, budget_kb: int) -> int:
    """What a run that ended by itself held at its end, with its largest process, if that is past its budget
    (else 0): files written all at once (``fallocate`` on a tmpfs) and a quick end escape the sums taken while
    it runs."""
    total = max_rss_kb + held.now_kb()
    return total if total > budget_kb else 0


def run_memory_kb(budget_kb: int, held: Held) -> int:
    """Memory of a run: every process in this pid namespace but the box (and, in a container, the agent),
    and what else it holds (see :class:`Held`).

    First the resident sizes, which cost little to read but count a page shared after a fork once per
    process; only when they add up to more than the budget, the proportional set sizes, which count it
    once but make the kernel walk every mapping.
    """
    held_kb = held.now_kb()
    supervisors = {"1", str(os.getpid()), held.checker or "1"}
    pids = [name for name in os.listdir("/proc") if name.isdigit() and name not in supervisors]
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    resident: dict[str, int] = {}  # where each process's memory is read -> its resident size
    for pid in pids:
        where = f"/proc/{pid}"
        kb = _resident_kb(where, page_kb)
        if kb == 0:
            # A process whose first thread exited alone reads empty (and its mappings gone) while its other
            # threads hold its memory: a live thread of it reads the whole process's.
            where = _live_thread(pid) or where
            kb = _resident_kb(where, page_kb)
        if kb is not None:
            resident[where] = kb
    if sum(resident.values()) + held_kb <= budget_kb:
        return sum(resident.values()) + held_kb
    total = held_kb
    for where in resident:
        if _lends_its_memory(where, resident):
            continue
        try:
            with open(f"{where}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            # Gone meanwhile, a zombie, or not dumpable (a notebook's kernel and its children, or a process that
            # asked): only a tracer may read its mappings. Its resident size would count every page it shares with
            # its parent once more, and honest notebooks that fork would be MLE: the memory cgroup bounds it.
            continue
    return total


def _lends_its_memory(where: str, counted: dict[str, int]) -> bool:
    """Whether the process at ``where`` waits for a child of ``vfork`` that is counted (``counted``) and waits for
    none itself: they share one address space, which each would count whole (their proportional sizes too: a page
    of one memory map is no page shared), and the child counts it (``vfork_wait.py``). One whose "child" is a
    thread of its own, or is none that is counted, counts its memory itself."""
    task = where if "/task/" in where else vfork_wait.leader(where)
    child = vfork_wait.vfork_child(task)
    return child is not None and child in counted and vfork_wait.vfork_child(vfork_wait.leader(child)) is None


class MemoryWatch:
    """Sums a run's memory every :data:`MEMORY_CHECK_MS` while the box waits for the run's events.

    In the box's own thread: a thread of its own would leave its stack and its malloc arena (tens of MiB) in
    the box's address space, and so in that of every run forked from it later, against its address-space
    limit. Most runs end before the first sum; a slow sum (hundreds of processes) spaces the next ones out.
    """

    def __init__(self, budget_kb: int, held: Held, cpu: run_cpu.CpuWatch | None = None) -> None:
        self.budget_kb = budget_kb
        self.held = held
        self.cpu = cpu  # the run's CPU time, summed when it could be past its limit
        self.peak_kb = 0
        self.interval = MEMORY_CHECK_MS / 1000
        self.due = time.monotonic() + self.interval

    def poll(self, poller: select.poll) -> dict[int, int]:
        """Wait for events, summing the run's memory (and CPU time) when a sum is due; past its budget (or
        limit), the run is killed."""
        while True:
            memory = bool(self.budget_kb) and not self.over()
            cpu = self.cpu is not None and not self.cpu.over
            dues = [due for due, on in ((self.due, memory), (self.cpu.due if self.cpu else 0.0, cpu)) if on]
            if not dues:
                return dict(poller.poll())
            events = dict(poller.poll(max(0, int((min(dues) - time.monotonic()) * 1000) + 1)))
            if events:
                return events
            began = time.monotonic()
            if cpu and self.cpu is not None and began >= self.cpu.due and self.cpu.check():
                kill_all()
            if not memory or began < self.due:
                continue
            self.peak_kb = max(self.peak_kb, run_memory_kb(self.budget_kb, self.held))
            if self.over():
                kill_all()
            # Never spend more than a tenth of the time summing.
            self.interval = max(MEMORY_CHECK_MS / 1000, (time.monotonic() - began) * 10)
            self.due = time.monotonic() + self.interval

    def over(self) -> bool:
        """Whether the run went over its budget (and was killed for it)."""
        return self.peak_kb > self.budget_kb


def _resident_kb(where: str, page_kb: int) -> int | None:
    """The resident size of the process (or thread) at ``where`` (``/proc/PID``); None where it is gone."""
    try:
        with open(f"{where}/statm", "rb") as f:
            return int(f.read().split()[1]) * page_kb
    except (OSError, ValueError, IndexError):
        return None


def _live_thread(pid: str) -> str | None:
    """``/proc/PID/task/TID`` of a thread of ``pid`` other than its first, if it has one."""
    try:
        tids = [tid for tid in os.listdir(f"/proc/{pid}/task") if tid != pid]
    except OSError:
        return None
    return f"/proc/{pid}/task/{tids[0]}" if tids else None
