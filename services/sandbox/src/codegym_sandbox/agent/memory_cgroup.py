"""The worker's memory cgroup: the bound on everything a run's processes hold, and a reader of a container's."""

from __future__ import annotations

import contextlib
import errno
import os
import time

from . import acting_ids


class MemoryCgroup:
    """A memory cgroup of the worker's own, where the host lets the agent make one (cgroup v1 or v2, as root).

    The kernel charges it every page that the box's processes hold, mapped or not: tmpfs files, pipe and
    socket buffers, page tables. Its limit is a run's memory budget plus :data:`SUPERVISORS_BYTES` for the
    box and a series' process (which live in it too, holding little of their own); past it, the kernel
    kills a process, first of the run (its processes ask to be the first, see ``box.py``). The box's sum
    of its run's memory (every 50 ms) stays the precise bound; this one is the bound nothing escapes.

    The agent makes it before entering the worker's root (which shows nothing of ``/sys/fs/cgroup``); the
    box joins it, and sets its limit, through a descriptor of its directory. In a container, the box only
    reads the container's own cgroup (:meth:`own`): how much kernel memory (socket and pipe buffers, page
    tables, inodes) its processes hold, which the box counts in a run's memory.
    """

    PARENT = "codegym-sandbox"
    SUPERVISORS_BYTES = 64 << 20
    # Kernel memory that earlier runs may leave charged here before the box gives it back (see give_back):
    # the supervisors' own, and what an honest run leaves (names it looked up), hold a few MiB.
    LEFT_KB = 32 << 10
    NESTED = "session"  # the cgroup inside a worker's of the copy that continues its session (see nested)
    STALE_S = 60  # an empty cgroup this old is left over from an agent that died (a box joins at once)

    def __init__(self, fd: int, parent_fd: int, name: str, version: int) -> None:
        self.fd, self.parent_fd, self.name, self.version = fd, parent_fd, name, version
        self.beside_fd = parent_fd  # where its siblings are made: its parent's, but for one nested in a worker's
        self.limit: int | None = None
        self.seen = 0
        self.floor_kb: int | None = None  # the supervisors' kernel memory here, before any run (see give_back)
        self.files: dict[str, int] = {}  # descriptors of the files read at every run, read again from 0

    @classmethod
    def own(cls) -> MemoryCgroup | None:
        """The cgroup this process is in, to read (a container's, mounted at the root of its cgroup tree)."""
        for root, version in (("/sys/fs/cgroup/memory", 1), ("/sys/fs/cgroup", 2)):
            if os.path.exists(f"{root}/memory.kmem.usage_in_bytes" if version == 1 else f"{root}/memory.stat"):
                with contextlib.suppress(OSError):
                    cgroup = cls(os.open(root, os.O_RDONLY | os.O_DIRECTORY), -1, "", version)
                    cgroup.seen = cgroup.oom_kills()  # kills before this box are no run's of its
                    return cgroup
        return None

    @classmethod
    def create(cls) -> MemoryCgroup | None:
        """A new cgroup for this worker (nobody in it yet); None where none can be made here (no memory
        controller, or none this process may write: a container's, whose own limit bounds it).

        Where the host has one and refuses a cgroup for now (its 65,535 ids taken, no memory), the worker does
        not start (``OSError``): without it, its runs would hold kernel memory that nothing counts or bounds.
        """
        for root, version in (("/sys/fs/cgroup/memory", 1), ("/sys/fs/cgroup", 2)):
            try:
                if version == 1 and not os.path.exists(f"{root}/memory.limit_in_bytes"):
                    continue
                if version == 2:
                    with open(f"{root}/cgroup.subtree_control") as f:
                        if "memory" not in f.read().split():
                            continue
                parent = f"{root}/{cls.PARENT}"
                os.makedirs(parent, exist_ok=True)
                cls._sweep(parent)
                if version == 2:
                    _write(f"{parent}/cgroup.subtree_control", "+memory")
                name = f"worker-{os.getpid()}-{os.urandom(8).hex()}"  # its agent's pid: see _sweep
                os.mkdir(f"{parent}/{name}")
                flags = os.O_RDONLY | os.O_DIRECTORY
                return cls(os.open(f"{parent}/{name}", flags), os.open(parent, flags), name, version)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.ENOMEM):
                    raise OSError(exc.errno, f"no memory cgroup for this worker: {exc.strerror}") from exc
                continue
        return None

    @classmethod
    def _sweep(cls, parent: str) -> None:
        """Remove the cgroups of agents that died (of any server on the host: they share the parent). Only by
        its agent's pid, gone: a live worker's cgroup is empty while its box starts again (a run may make that
        happen), and one removed then left that worker's every later run without a memory bound."""
        now = time.time()
        with os.scandir(parent) as entries:
            for entry in entries:
                with contextlib.suppress(OSError, ValueError, IndexError, OverflowError):
                    if entry.name.startswith("worker-") and now - entry.stat().st_mtime > cls.STALE_S:
                        try:
                            os.kill(int(entry.name.split("-")[1]), 0)
                            continue  # its agent lives (or its pid was taken again: the cgroup waits)
                        except ProcessLookupError:
                            pass
                        _remove_children(entry.path)  # its runs' (run_cgroup.py), its session's (nested)
                        with contextlib.suppress(OSError):  # its page cache given back first (see remove)
                            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
                            try:
                                _give_back(fd)
                            finally:
                                os.close(fd)
                        os.rmdir(entry.path)  # refused while a process is in it

    def join(self) -> bool:
        """Put the calling process (and so every process it forks from now on) in the cgroup."""
        try:
            self._set("cgroup.procs", "0")
            if self.version == 2:
                self._set("memory.swap.max", "0")
        except OSError:
            return False
        self.seen = self.oom_kills()
        return True

    @acting_ids.root_files
    def remove(self) -> None:
        """Remove the cgroup, once the box and every process of its namespace are gone: what its runs left in the
        page cache given back first, which would otherwise keep it a dying cgroup, holding one of the kernel's
        65,535 ids for as long as the pages stay (every worker or session replaced would hold one more, until no
        worker of any server on the host could start)."""
        self._reclaim()
        if self.fd >= 0:  # the worker's session's own, inside it (nested), where no process of it is left
            with contextlib.suppress(OSError):
                os.rmdir(self.NESTED, dir_fd=self.fd)
        for _ in range(50):
            try:
                os.rmdir(self.name, dir_fd=self.parent_fd)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # its last processes are still exiting

    @classmethod
    @acting_ids.root_files
    def beside(cls, path: str) -> MemoryCgroup | None:
        """Where a container's session's copies' memory cgroups are made (:meth:`sibling`): ``path``, a directory of
        the host's bound into the container by the server (the container's own cgroups are read-only)."""
        try:
            parent = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        return cls(-1, parent, "", 1 if os.path.exists(f"{path}/memory.limit_in_bytes") else 2)

    @acting_ids.root_files
    def sibling(self) -> MemoryCgroup | None:
        """A new cgroup beside this one, empty and without a limit (a session's copy's own: see
        ``kernel_copy.py``); None where this one is not the agent's to make beside (a container's)."""
        if self.beside_fd < 0:
            return None
        name = f"worker-{os.getpid()}-{os.urandom(8).hex()}"  # removed with the agent, as this one: see _sweep
        os.mkdir(name, dir_fd=self.beside_fd)
        flags = os.O_RDONLY | os.O_DIRECTORY
        return MemoryCgroup(os.open(name, flags, dir_fd=self.beside_fd), self.beside_fd, name, self.version)

    @acting_ids.root_files
    def nested(self, limit: int) -> MemoryCgroup | None:
        """A new cgroup inside this one, with limit ``limit``: where the copy that continues the worker's session
        goes (``copy_lineage.py``). What the session held before it was copied stays charged here (a charge never
        moves with its process), and the cgroup v1 hierarchy charges what it holds from then on here too: this
        one's limit bounds both. None where none can be made: cgroup v2's (this one holds the box, and a cgroup
        that holds processes gives its children no memory controller), or a container's."""
        if self.version != 1 or self.fd < 0 or self.parent_fd < 0:
            return None
        try:
            if self._field("memory.use_hierarchy", b"") != 1:
                self._set("memory.use_hierarchy", "1")  # kernels before 5.x: set where it has no child yet
            os.mkdir(self.NESTED, dir_fd=self.fd)
        except OSError:
            return None
        child = MemoryCgroup(
            os.open(self.NESTED, os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.fd), self.fd, self.NESTED, 1
        )
        child.beside_fd = self.parent_fd  # its copies' own are made beside the worker's, not inside it
        child.hold_to(limit)
        if child.limit is None:
            child.remove()
            os.close(child.fd)
            return None
        return child

    def usage(self) -> int:
        """The bytes charged here now that the kernel cannot take back on its own, its children's included: swap
        counted (a program could page its memory out before it is read, and back in after), file cache not (the
        kernel reclaims it under the limit; a container's holds its image's files). 0 where it cannot be read."""
        if self.version == 2:
            charged = self._field("memory.current", b"") + self._field("memory.swap.current", b"")
            cache = self._field("memory.stat", b"active_file") + self._field("memory.stat", b"inactive_file")
        else:
            charged = self._field("memory.memsw.usage_in_bytes", b"") or self._field("memory.usage_in_bytes", b"")
            cache = self._field("memory.stat", b"total_active_file") + self._field(
                "memory.stat", b"total_inactive_file"
            )
        return max(charged - cache, 0)

    def add(self, pid: int) -> None:
        """Put process ``pid`` in it (what it holds from now on is charged here)."""
        self._set("cgroup.procs", str(pid))

    def descriptors(self) -> set[int]:
        """The descriptors it holds open (what a process that keeps it must keep)."""
        return {fd for fd in (self.fd, self.parent_fd, self.beside_fd, *self.files.values()) if fd >= 0}

    @acting_ids.root_files
    def pids(self) -> set[int]:
        """The processes in it now (every process of a session's copy: none can leave, see ``kernel_place.py``)."""
        try:
            fd = os.open("cgroup.procs", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return set()
        try:
            data = b""
            while chunk := os.read(fd, 1 << 16):
                data += chunk
        finally:
            os.close(fd)
        return {int(pid) for pid in data.split()}

    @acting_ids.root_files
    def procs(self) -> int:
        """A descriptor of its ``cgroup.procs``, to write into (``0``: the writer) once its writer can no longer
        open it."""
        return os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.fd)

    def apply(self, budget_bytes: int) -> None:
        """The limit for the next run: its budget (every run has one, whatever its language) and the
        supervisors' share."""
        self.hold_to(budget_bytes + self.SUPERVISORS_BYTES)

    def hold_to(self, limit: int | None) -> None:
        """Set the cgroup's limit to ``limit`` bytes."""
        if limit == self.limit or self.parent_fd < 0:  # the same, or a container's: not ours to set
            return
        try:
            if self.version == 2:
                self._set("memory.max", str(limit or "max"))
            else:
                # Memory and swap together (absent without swap) may never be below memory alone.
                value, memsw = str(limit or -1), "memory.memsw.limit_in_bytes"
                raising = self.limit is not None and (limit is None or limit > self.limit)
                swap = os.path.exists(f"/proc/self/fd/{self.fd}/{memsw}")
                for name in (memsw, "memory.limit_in_bytes") if raising else ("memory.limit_in_bytes", memsw):
                    if name != memsw or swap:
                        self._set(name, value)
            self.limit = limit
        except OSError:
            self.limit = None  # usage above the new limit, which cannot be reclaimed: tried again next run

    def take_floor(self, known: int | None) -> None:
        """Take the supervisors' own kernel memory here, before any run, as the floor of :meth:`give_back`:
        ``known`` where an earlier box of this worker measured it. A box that starts again after a run killed
        the last one must not take what that run left for the supervisors' (a floor raised by it would let
        every later run leave as much); where the cgroup is the worker's own, that is given back first."""
        if known is None:
            self._reclaim()
            known = self.kernel_kb()
        self.floor_kb = known

    def holds_left(self) -> bool:
        """Whether the kernel memory here passes the floor by :data:`LEFT_KB` (see :meth:`give_back`)."""
        return self.floor_kb is not None and self.kernel_kb() - self.floor_kb >= self.LEFT_KB

    def give_back(self) -> bool:
        """Reclaim what earlier runs left charged here that no process holds (the kernel's entries of names they
        looked up, the page cache of files they read) once their kernel memory passes :data:`LEFT_KB`: left
        there, the next run's processes would reclaim it as they grow, on their own CPU time (slowly: a million
        names looked up took a victim a second and a half, and a time limit), and the server, which reads this
        cgroup's count, would take it for theirs. False where that much is left and cannot be given back here:
        a container's cgroup is its engine's, and the worker must be replaced (its cgroup goes with it).
        """
        if not self.holds_left():  # the floor is the box's, taken as it starts (take_floor)
            return True
        if self.parent_fd < 0:
            return False
        # What live processes and files hold stays (the kernel says so, and gives back the rest): the run's
        # files until the box is reset, which frees them. The floor stays the supervisors': a floor raised to
        # what a run's files held would let the next run leave as much.
        self._reclaim()
        return True

    def _reclaim(self) -> None:
        """Give back what no process or file holds here, where the cgroup is the worker's own to ask."""
        if self.parent_fd >= 0:
            _give_back(self.fd)

    def oom_kills(self) -> int:
        """How many processes the kernel has killed here for memory."""
        return self._field("memory.events" if self.version == 2 else "memory.oom_control", b"oom_kill")

    def kernel_kb(self) -> int:
        """Kernel memory held by the cgroup's processes: never mapped, so in no process's memory."""
        if self.version == 2:
            return self._field("memory.stat", b"kernel") // 1024
        return self._field("memory.kmem.usage_in_bytes", b"") // 1024

    @acting_ids.root_files
    def _field(self, name: str, key: bytes) -> int:
        """The number after ``key`` in file ``name`` (the file's only number with an empty key); 0 if none."""
        try:
            if name not in self.files:
                self.files[name] = os.open(name, os.O_RDONLY, dir_fd=self.fd)
            for line in os.pread(self.files[name], 1 << 14, 0).splitlines():
                words = line.split()
                if not key and len(words) == 1:
                    return int(words[0])
                if len(words) == 2 and words[0] == key:
                    return int(words[1])
        except (OSError, ValueError):
            pass
        return 0

    def over(self) -> bool:
        """Whether the kernel killed a process for memory since the last call."""
        kills = self.oom_kills()
        over, self.seen = kills > self.seen, kills
        return over

    @acting_ids.root_files
    def _set(self, name: str, value: str) -> None:
        fd = os.open(name, os.O_WRONLY, dir_fd=self.fd)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)


@acting_ids.root_files
def _give_back(cgroup: int) -> None:
    """Ask the cgroup open at ``cgroup`` to give back what no process or file holds there: cgroup v1's
    ``memory.force_empty``, v2's ``memory.reclaim`` of all it holds. Opens no file it does not find (a
    directory that is no cgroup is left as it is)."""

    def write(name: str, value: bytes) -> None:
        fd = os.open(name, os.O_WRONLY, dir_fd=cgroup)
        try:
            os.write(fd, value)
        finally:
            os.close(fd)

    with contextlib.suppress(OSError, ValueError):
        try:
            write("memory.force_empty", b"0")
        except FileNotFoundError:  # cgroup v2
            fd = os.open("memory.current", os.O_RDONLY, dir_fd=cgroup)
            try:
                held = int(os.read(fd, 64))
            finally:
                os.close(fd)
            write("memory.reclaim", str(held).encode())


def _remove_children(path: str) -> None:
    """Remove the cgroups inside the one at ``path`` (a dead agent's), their own children first, each given back
    what it holds first."""
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _remove_children(entry.path)
                with contextlib.suppress(OSError):
                    fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        _give_back(fd)
                    finally:
                        os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)
