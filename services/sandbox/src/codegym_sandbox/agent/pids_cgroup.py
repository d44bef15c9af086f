"""A session's copy's count of processes in a container: a pids cgroup of its own.

On the local backend each copy's processes are bounded by its process limit, counted for its host user alone.
In a container the processes of every member of a forked session are in the container's pids cgroup, one bound
for them all: a fork bomb in one copy would leave its siblings none. So each member is put in a pids cgroup of
its own, made in a directory of the host's that the server binds into the container (as the copies' memory
cgroups are: ``backends/containers.py``), with the bound one session has (``copy_processes``).
"""

from __future__ import annotations

import contextlib
import os
import time

from . import acting_ids


class PidsCgroup:
    """A copy's pids cgroup (or, with no name, the directory they are made in), and the most processes each may
    hold."""

    def __init__(self, directory: int, parent: int, name: str, most: int) -> None:
        self.directory, self.parent, self.name, self.most = directory, parent, name, most

    @classmethod
    @acting_ids.root_files
    def beside(cls, path: str, most: int) -> PidsCgroup | None:
        """Where a container's session's copies' pids cgroups are made: ``path`` (bound by the server)."""
        try:
            return cls(-1, os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), "", most)
        except OSError:
            return None

    @acting_ids.root_files
    def sibling(self) -> PidsCgroup:
        """A new cgroup beside this one, bounded to :attr:`most` processes."""
        name = f"worker-{os.getpid()}-{os.urandom(8).hex()}"
        os.mkdir(name, dir_fd=self.parent)
        directory = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.parent)
        made = PidsCgroup(directory, self.parent, name, self.most)
        try:
            made._write("pids.max", str(self.most))
        except OSError:
            made.remove()
            raise
        return made

    def add(self, pid: int) -> None:
        """Put process ``pid`` in it (every process it starts from now on is counted here)."""
        self._write("cgroup.procs", str(pid))

    def descriptors(self) -> set[int]:
        return {fd for fd in (self.directory, self.parent) if fd >= 0}

    @acting_ids.root_files
    def remove(self) -> None:
        """Remove it, once its processes are gone (the last may still be exiting)."""
        if not self.name:
            return
        for _ in range(50):
            try:
                os.rmdir(self.name, dir_fd=self.parent)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)
        with contextlib.suppress(OSError):
            os.close(self.directory)
        self.directory = -1

    @acting_ids.root_files
    def _write(self, name: str, value: str) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.directory)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
