"""What the container backends share: names, labels, hardening, and cleaning up after a crashed server.

Every slot is one persistent container whose init is the agent. The container is the worker's isolation:
no network, ``no-new-privileges``, a read-only root with tmpfs scratch space, no pseudo-terminals, and
pids, memory and CPU limits. The agent starts as root with no capability but :data:`CAPABILITIES` and runs
programs as ``container_user``: no program shares a uid with the agent or the box, so none can signal
them, renice them or change their limits. The server speaks to the agent over the container's attached
stdin and stdout, so a run never pays for a ``docker exec`` or a new interpreter.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

LABEL = "codegym.sandbox"  # every container a server makes carries it, with the owner's identity below
AGENT_USER = "0:0"
# What the agent and the box need as root: to run programs under another uid, and to signal them.
CAPABILITIES = ("SETUID", "SETGID", "KILL")


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
