"""What the container backends share: names, labels, hardening, and cleaning up after a crashed server.

Every slot is one persistent container whose init is the agent. The container is the worker's isolation:
no network, ``no-new-privileges``, a read-only root with tmpfs scratch space, no pseudo-terminals, and
pids, memory and CPU limits. The agent starts as root with no capability but :data:`CAPABILITIES` and runs
programs as ``container_user``: no program shares a uid with the agent or the box, so none can signal
them, renice them or change their limits. The server speaks to the agent over the container's attached
stdin and stdout, so a run never pays for a ``docker exec`` or a new interpreter.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import time
from dataclasses import dataclass

LABEL = "codegym.sandbox"  # every container a server makes carries it, with the owner's identity below
AGENT_USER = "0:0"
# What the agent and the box need as root: to run programs under another uid, and to signal them.
CAPABILITIES = ("SETUID", "SETGID", "KILL")
# And in a session's container, where the agent copies a session's interpreter for a fork: to trace it, another
# user's process (``agent/kernel_copy.py``).
SESSION_CAPABILITIES = ("SYS_PTRACE",)
# And on docker, which cannot mount a container's /proc with ``hidepid`` as podman does: for the agent to remount it
# so at its start (``agent/worker_start.py``), which gives it up at once, before any program runs. With it in the
# container's set, docker's seccomp profile lets the programs' user make a copy's namespaces too.
PROC_CAPABILITIES = ("SYS_ADMIN",)


@dataclass(frozen=True)
class ContainerSpec:
    """The settings of every container of one server."""

    image: str
    server_id: str
    memory_mb: int
    cpus: float
    pids: int
    open_files: int
    tmp_mb: int
    runtime: str = ""  # the engine's OCI runtime (runsc: gVisor); empty: the engine's default
    session_pids: int = 0  # a session's container (its slot past the runs'): its processes; 0: ``pids``
    session_processes: int = 0  # a session's own processes (its kernel's and what it starts): a copy's bound too

    def pids_of(self, slot: int, first_session_slot: int) -> int:
        """The pids limit of slot ``slot``'s container: a session's holds its own process limit."""
        return self.session_pids if slot >= first_session_slot and self.session_pids else self.pids

    @property
    def job(self) -> str:
        return os.environ.get("SLURM_JOB_ID") or "local"

    def name(self, slot: int) -> str:
        """``codegym-sandbox-{SLURM_JOB_ID|local}-{server}-{slot}``: two servers on one host never collide."""
        return f"codegym-sandbox-{self.job}-{self.server_id}-{slot}"

    def labels(self) -> dict[str, str]:
        return {
            LABEL: "1",
            f"{LABEL}.server": self.server_id,
            f"{LABEL}.host": socket.gethostname(),
            f"{LABEL}.pid": str(os.getpid()),
        }

    @property
    def tmpfs(self) -> dict[str, str]:
        """The only writable place besides /dev/shm: the scratch directory, the agent's to empty. And an
        empty, read-only ``/dev/pts`` over the engine's own: a container's pseudo-terminals come from the
        host's pool, which no run may drain.

        Mode 1777 rather than an owner: podman's tmpfs takes no uid option. The directory stays root's, so
        that no program can change its mode or extended attributes; the agent empties it between runs.
        """
        # exec: compiled programs run from here.
        return {
            "/tmp/box": f"rw,exec,nosuid,nodev,size={self.tmp_mb}m,mode=1777",
            "/dev/pts": "ro,nosuid,nodev,noexec,size=4k,mode=0755",
        }


def is_stale(labels: dict[str, str]) -> bool:
    """Whether a labelled container belongs to a server on this host that is no longer running."""
    if labels.get(f"{LABEL}.host") != socket.gethostname():
        return False  # another host's: not ours to judge
    try:
        pid = int(labels.get(f"{LABEL}.pid", ""))
    except ValueError:
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


class CopyCgroups:
    """The cgroups of a session's copies in a container (``agent/kernel_copy.py``): each copy is a memory cgroup,
    a CPU count and a count of processes of its own, which the container's read-only cgroups cannot hold. The
    server (root on the host) makes a directory in the host's memory, cpuacct and pids hierarchies for each
    session's container, binds them into it read-write at :data:`INSIDE` (root's alone: no program of the
    container may enter), where the agent makes each copy's, and removes them with the container. cgroup v1
    only: on v2, moving a process out of a container's cgroup namespace is refused."""

    INSIDE = ("/run/codegym-copies/memory", "/run/codegym-copies/cpuacct", "/run/codegym-copies/pids")
    PARENT = "codegym-sandbox-copies"
    ROOTS = (
        ("/sys/fs/cgroup/memory",),
        ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"),
        ("/sys/fs/cgroup/pids",),
    )

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots

    @classmethod
    def refusal(cls, runtime: str) -> str | None:
        """Why a container of this host can hold no session's copies, or None."""
        if platform.machine() != "x86_64":
            return "forking a session is offered on x86_64 only"
        if os.geteuid() != 0:
            return "forking a session in a container needs the server run as root (it makes the copies' cgroups)"
        if os.path.basename(runtime) == "runsc":
            return "forking a session is not offered on gVisor's runtime"
        if cls.find() is None:
            return (
                "forking a session in a container needs the host's cgroup v1 memory, cpuacct and pids hierarchies, "
                "writable by the server (run on the host)"
            )
        return None

    @classmethod
    def find(cls) -> CopyCgroups | None:
        """The host's memory, cpuacct and pids hierarchies (v1), where this server may make cgroups; or None (a
        server in a container, whose cgroups are its own and read-only: the paths it would bind are not the host's)."""
        found = []
        for roots in cls.ROOTS:
            root = next((r for r in roots if os.path.exists(f"{r}/cgroup.procs")), None)
            if root is None or not os.access(root, os.W_OK):
                return None
            found.append(root)
        return cls(tuple(found)) if os.path.exists(f"{found[0]}/memory.limit_in_bytes") else None

    def paths(self, name: str) -> list[str]:
        """Container ``name``'s directories, named with this server's pid too: every server on the host shares the
        parent (docker's and podman's), and one starting removes only what servers that are gone left there."""
        return [f"{root}/{self.PARENT}/{name}@{os.getpid()}" for root in self.roots]

    def make(self, name: str, cpus: float) -> list[str]:
        """The directories for container ``name`` (anything left of an earlier one removed first): the host's paths,
        in the order of :data:`INSIDE`. Where the host's cpuacct hierarchy is its cpu controller's too, a copy
        moved into a cgroup there leaves the container's CPU quota: the copies together get ``cpus`` there."""
        self.remove(name)
        paths = self.paths(name)
        for path in paths:
            os.makedirs(path, exist_ok=True)
            os.chmod(path, 0o700)  # the agent's (root's) alone: no program of the container may enter it
        if os.path.exists(f"{paths[1]}/cpu.cfs_quota_us"):
            with open(f"{paths[1]}/cpu.cfs_period_us", "w") as f:
                f.write("100000")
            with open(f"{paths[1]}/cpu.cfs_quota_us", "w") as f:
                f.write(str(max(1000, int(cpus * 100000))))
        return paths

    def sweep(self) -> None:
        """Remove what servers that are gone left (a server killed removes nothing): the directories named with the
        pid of a process this host no longer runs (a cgroup that holds a process is not removed). Not by the
        containers an engine lists: a live server's container of the other engine, or one not made yet, is none."""
        for root in self.roots:
            names: list[str] = []  # none yet: no session's container has forked on this host since it started
            with contextlib.suppress(OSError), os.scandir(f"{root}/{self.PARENT}") as entries:
                names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
            for name in names:
                owner, _, pid = name.rpartition("@")
                if owner and pid.isdigit() and not _runs(int(pid)):
                    self._remove(f"{root}/{self.PARENT}/{name}", tries=1)

    def remove(self, name: str, tries: int = 50) -> None:
        """Remove container ``name``'s directories and the copies' cgroups in them, once the container is gone (its
        processes were the only ones in them; the last may still be exiting)."""
        for path in self.paths(name):
            self._remove(path, tries)

    @staticmethod
    def _remove(path: str, tries: int) -> None:
        if not os.path.isdir(path):
            return
        for _ in range(tries):
            with contextlib.suppress(OSError):
                for entry in os.scandir(path):
                    if entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            os.rmdir(entry.path)
                os.rmdir(path)
                return
            time.sleep(0.02)


def _runs(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
