"""The kernel's count of the CPU time a run uses: a cgroup that every process of a run is in, and no other.

A sum over a run's processes always misses some: a process whose parent ignores ``SIGCHLD`` (or sets
``SA_NOCLDWAIT``) is reaped by the kernel when it exits, and its time is added to no one's. The cgroup's
count (``cpuacct.usage`` on cgroup v1, ``cpu.stat``'s ``usage_usec`` on v2) is every CPU second any of its
processes spent, alive, exited, reaped by anyone or by nobody; a process can leave it only by writing to a
``cgroup.procs`` file, which programs neither see nor may write.

Where the agent can make one (as root, with cgroup v1's ``cpuacct`` hierarchy writable, or on v2 below the
worker's memory cgroup), every worker has a cgroup for its runs (:meth:`RunCgroup.create`): each process that
runs a program joins it first (the box's spare, a test's process), while the supervisors (box, series'
process, checker) stay out. In a container, which may not make cgroups, the container's own (one worker's:
the agent, its box and their runs) is read instead (:meth:`RunCgroup.own`), less what the supervisors used by
their own count. Where neither is there, :func:`run_cpu.living_cpu_s` and the box's ``RUSAGE_CHILDREN`` are
all there is (see ``codegym-sandbox doctor``'s cgroups check).
"""

from __future__ import annotations

import contextlib
import os
import time

from . import acting_ids
from .memory_cgroup import MemoryCgroup

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PARENT = "codegym-sandbox"
STALE_S = 60  # an empty cgroup this old is left over from an agent that died
# Where a hierarchy with the cpuacct controller is mounted on cgroup v1 hosts (alone or with cpu).
V1_ROOTS = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu")
# cgroup v2's root: all of it, or (hybrid hosts) the unified hierarchy beside v1's.
V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")


class RunCgroup:
    """A cgroup whose CPU count is a run's: read at a run's start and end (and while it runs, to stop it)."""

    def __init__(self, usage: int, procs: int, version: int, parent: int = -1, name: str = "") -> None:
        self.usage, self.procs, self.version = usage, procs, version
        self.parent, self.name = parent, name  # where it is to be removed from (none for a container's own)

    @classmethod
    def create(cls, memory: MemoryCgroup | None) -> RunCgroup | None:
        """A cgroup for one worker's runs, empty; None where none can be made. Where the worker's memory cgroup
        is v2's (one hierarchy for memory and CPU), a child of it: a run stays within the worker's memory limit."""
        if memory is not None and memory.version == 2:
            memory_dir, name = memory.fd, "run"
            with contextlib.suppress(OSError):
                try:
                    os.mkdir(name, dir_fd=memory_dir)
                except FileExistsError:  # a member's own, which the copy continuing it keeps: a count of its own
                    name = f"run-{os.getpid()}-{os.urandom(8).hex()}"
                    os.mkdir(name, dir_fd=memory_dir)
                directory = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=memory_dir)
                return cls._open(directory, 2, memory_dir, name)
        for roots, version, marker in ((V1_ROOTS, 1, "cpuacct.usage"), (V2_ROOTS, 2, "cgroup.controllers")):
            for root in roots:
                if not os.path.exists(f"{root}/{marker}"):
                    continue
                try:
                    parent = f"{root}/{PARENT}"
                    os.makedirs(parent, exist_ok=True)
                    _sweep(parent)
                    name = f"run-{os.getpid()}-{os.urandom(8).hex()}"  # the agent's pid: see _sweep
                    os.mkdir(f"{parent}/{name}")
                    flags = os.O_RDONLY | os.O_DIRECTORY
                    return cls._open(os.open(f"{parent}/{name}", flags), version, os.open(parent, flags), name)
                except OSError:
                    continue
        return None

    @classmethod
    @acting_ids.root_files
    def _open(cls, directory: int, version: int, parent: int, name: str) -> RunCgroup | None:
        try:
            usage = os.open("cpuacct.usage" if version == 1 else "cpu.stat", os.O_RDONLY, dir_fd=directory)
            procs = os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=directory)
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
            return None
        finally:
            os.close(directory)
        cgroup = cls(usage, procs, version, parent, name)
        return cgroup if cgroup.cpu_s() >= 0 else None

    @classmethod
    def own(cls) -> RunCgroup | None:
        """The cgroup this process is in (a container's, mounted at the root of its cgroup tree), to read."""
        for root in ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"):
            version = 2 if root == "/sys/fs/cgroup" else 1
            usage = "cpuacct.usage" if version == 1 else "cpu.stat"
            with contextlib.suppress(OSError, ValueError):
                # Only a cgroup this process is in itself: a host's root, mounted as it is, counts everyone's.
                with open(f"{root}/cgroup.procs", "rb") as f:
                    if os.getpid() not in {int(pid) for pid in f.read().split()}:
                        continue
                cgroup = cls(os.open(f"{root}/{usage}", os.O_RDONLY), -1, version)
                if cgroup.cpu_s() >= 0:
                    return cgroup
        return None

    @classmethod
    @acting_ids.root_files
    def beside(cls, path: str, memory: MemoryCgroup | None) -> RunCgroup | None:
        """Where a container's session's copies' cgroups are made: ``path``, a directory of the host's bound into the
        container by the server (the container's own cgroups are read-only); the memory cgroup's on v2."""
        if memory is not None and memory.version == 2:
            return cls(-1, -1, 2)
        try:
            return cls(-1, -1, 1, os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            return None

    @acting_ids.root_files
    def sibling(self, memory: MemoryCgroup | None) -> RunCgroup | None:
        """A new cgroup for a session's copy (``kernel_copy.py``): beside this one on cgroup v1, under
        ``memory`` (the copy's own memory cgroup) on v2; None where none can be made."""
        if memory is not None and memory.version == 2:
            return RunCgroup.create(memory)
        if self.parent < 0:
            return None
        name = f"run-{os.getpid()}-{os.urandom(8).hex()}"  # the agent's pid: see _sweep
        try:
            os.mkdir(name, dir_fd=self.parent)
        except OSError:
            return None
        directory = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.parent)
        return RunCgroup._open(directory, self.version, self.parent, name)

    def descriptors(self) -> set[int]:
        """The descriptors it holds open (what a process that keeps it must keep)."""
        return {fd for fd in (self.usage, self.procs, self.parent) if fd >= 0}

    def add(self, pid: int) -> None:
        """Put process ``pid`` in it."""
        os.write(self.procs, str(pid).encode())

    @property
    def shared(self) -> bool:
        """Whether supervisors are in it too (a container's own): their own time is then taken off."""
        return self.procs < 0

    def join(self) -> None:
        """Put the calling process (and every process it forks from now on) in it: first thing in a process
        that runs a program, while it is still root. The descriptor is then closed: a program holds none."""
        if self.procs >= 0:
            with contextlib.suppress(OSError):
                os.write(self.procs, b"0")
            os.close(self.procs)

    def cpu_s(self) -> float:
        """CPU seconds its processes used since it was made (-1 where it cannot be read)."""
        try:
            data = os.pread(self.usage, 4096, 0)
            if self.version == 1:
                return int(data) / 1e9
            for line in data.splitlines():
                key, _, value = line.partition(b" ")
                if key == b"usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            pass
        return -1.0

    def used_s(self, supervisors: set[str]) -> float:
        """The runs' CPU seconds so far: its count, less (in a container's own) what ``supervisors`` (pids
        in ``/proc``) used by their own count. A difference of two reads is a run's time."""
        used = self.cpu_s()
        if self.shared:
            used -= sum(own_cpu_s(pid) for pid in supervisors)
        return used

    @acting_ids.root_files
    def remove(self) -> None:
        """Remove it, once every process in it is gone."""
        if self.parent < 0:
            return
        for _ in range(50):
            try:
                os.rmdir(self.name, dir_fd=self.parent)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # its last processes are still exiting


def checker_cpu_s(pid: str, meter: RunCgroup | None) -> float:
    """A series' checker's CPU time (``assert_checker.py``: the tests run in forks of its children, the judges), its
    living children's with it, and those each waited for (a judge's runs' forks, the judges the checker ended) but
    where they are in ``meter``'s count already (a container's own, which counts every process, where the living
    ones are supervisors and taken off). What a judge waited for is counted as it is reaped, not when the judge ends:
    a judge that ended in a run once charged that run the forks of all the runs it had judged (7 runs' tests, 2.2 s)."""
    reaped = meter is None or not meter.shared
    living = sum(own_cpu_s(child, reaped=reaped) for child in checker_children(pid))
    return own_cpu_s(pid, reaped=reaped) + living


def checker_children(pid: str) -> list[str]:
    """The living children of a series' checker (the processes that judge its tests), or of a judge: from the
    first thread's list, as each has one thread."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except OSError:
        return []


def own_cpu_s(pid: str, reaped: bool = False) -> float:
    """The CPU time of process ``pid`` itself (all its threads; with ``reaped``, and the children it waited for),
    in seconds; 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        children = int(fields[13]) + int(fields[14]) if reaped else 0  # cutime, cstime
        return (int(fields[11]) + int(fields[12]) + children) / _CLOCK_TICKS  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0.0


def _sweep(parent: str) -> None:
    """Remove the cgroups of agents that died: a live one's is empty between its runs, so its agent (named in
    it) must be gone too."""
    now = time.time()
    with os.scandir(parent) as entries:
        for entry in entries:
            with contextlib.suppress(OSError, ValueError, IndexError):
                if entry.name.startswith("run-") and now - entry.stat().st_mtime > STALE_S:
                    try:
                        os.kill(int(entry.name.split("-")[1]), 0)
                    except ProcessLookupError:
                        os.rmdir(entry.path)  # refused while a process is in it
