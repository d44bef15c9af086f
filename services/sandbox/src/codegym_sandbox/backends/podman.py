"""The podman and podman-hpc backends: persistent containers through the engine's command line.

``podman run -i`` keeps the client attached to the container's stdin and stdout, which makes it the same
pipe channel the local backend has to its agents; but its frames then pass through the client and conmon, two
copies each way, so the agent is given a socket of the server's own, past them (``agent_channel.py``), and the
pipes stay its channel only where it cannot reach that. podman-hpc is podman plus site configuration
(``migrate``d images, site flags): the binary name and extra ``run`` flags are settings. Podman needs
explicit ``--ulimit`` values on hosts whose defaults it cannot apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import shutil
import tempfile

from ..agent.isolation import MASKED
from ..agent.protocol import WorkerConfig
from .agent_channel import INSIDE, Channels, peer_pid
from .base import SandboxFault
from .containers import AGENT_USER, CAPABILITIES, LABEL, SESSION_CAPABILITIES, ContainerSpec, CopyCgroups, is_stale
from .pool import WorkerPool
from .worker import START_TIMEOUT_S, AgentWorker, ProcessWorker
from .worker_cost import parent_pid

log = logging.getLogger("codegym.sandbox.podman")


async def _podman(binary: str, *args: str, timeout: float = 60) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        binary,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return 124, b"", f"{binary} {args[0]} timed out".encode()
    return proc.returncode or 0, out, err


def runtime_flags(runtime: str) -> list[str]:
    """podman's global flags for the OCI runtime ``runtime`` (empty: the engine's default)."""
    if not runtime:
        return []
    flags = ["--runtime", runtime]
    if os.path.basename(runtime) == "runsc":
        # The containers have no network, so gVisor needs no network stack of its own either; and Debian
        # bookworm's runsc takes any network namespace of a 6.x kernel for the host's and refuses to start in it.
        flags += ["--runtime-flag", "network=none"]
    return flags


class PodmanWorker(ProcessWorker):
    def __init__(
        self,
        slot: int,
        config: WorkerConfig,
        argv: list[str],
        binary: str,
        name: str,
        cwd: str,
        copies: CopyCgroups | None = None,
        cpus: float = 1.0,
        channels: Channels | None = None,
    ) -> None:
        super().__init__(slot, config, argv, None, cwd)
        self.binary = binary
        self.name = name
        self.copies, self.cpus = copies, cpus  # a session's container: its copies' cgroups, made before it starts
        self.channels = channels or Channels("podman")
        self._own = False  # whether the channel is a socket of the server's (the client's pipes stay open beside it)

    async def _open(self) -> None:
        await _podman(self.binary, "rm", "-f", self.name)  # a leftover of this slot from an earlier life
        if self.copies is not None:
            await asyncio.to_thread(self.copies.make, self.name, self.cpus)
        channel = self.channels.open(self.slot)
        if channel is None:
            await super()._open()
            return
        try:
            named = [f"--env={key}={value}" for key, value in channel.environment.items()]
            # Before the image, the argv's last word.
            await self._spawn([*self.argv[:-1], f"--volume={channel.directory}:{INSIDE}:ro", *named, self.argv[-1]])
            assert self.proc is not None and self.proc.stdout is not None
            own = await channel.wait_beside(self.proc.stdout, START_TIMEOUT_S)
        finally:
            channel.close()
        if own is None:
            self.channels.off("an agent cannot reach the server's socket")
            return
        own.setblocking(False)
        self.seen_pid = peer_pid(own)
        self.reader, self.writer = await asyncio.open_connection(sock=own, limit=1 << 20)
        self._own = True

    def engine_pids(self) -> list[int]:
        # The attached client, and the container's conmon (its init's parent) where the agent's pid is seen.
        return [self.pid, *([parent_pid(self.seen_pid)] if self.seen_pid else [])]

    async def kill(self) -> None:
        # Killing the attached client does not stop the container: remove it by name.
        await _podman(self.binary, "rm", "-f", "-t", "0", self.name)
        if self._own and self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.writer.wait_closed(), 5)
        await super().kill()
        if self.copies is not None:
            await asyncio.to_thread(self.copies.remove, self.name)


async def remove_stale(binary: str, name: str) -> None:
    """Remove the containers of servers on this host that are gone (killed before they removed theirs): their
    programs' processes would hold their uids (see ``program_users.in_use``) and their memory. ``name``: the
    backend's, for the log."""
    with contextlib.suppress(OSError):
        code, out, _ = await _podman(binary, "ps", "-a", "--filter", f"label={LABEL}", "--format", "json")
        with contextlib.suppress(ValueError):
            for container in json.loads(out or b"[]") if code == 0 else []:
                if is_stale(container.get("Labels") or {}):
                    gone = (container.get("Names") or [container.get("Id", "")])[0]
                    log.warning("%s: removing %s, left behind by a server that is gone", name, gone)
                    await _podman(binary, "rm", "-f", "-t", "0", gone)


class PodmanBackend(WorkerPool):
    starts_ahead = False  # see WorkerPool.starts_ahead
    least_worker_cost_mb = 57  # see worker_cost.py

    def __init__(
        self,
        workers: int,
        queue_size: int,
        config: WorkerConfig,
        spec: ContainerSpec,
        binary: str,
        extra_args: list[str],
        name: str = "podman",
    ) -> None:
        super().__init__(workers, queue_size, {**config, "namespaces": False})
        self.spec = spec
        self.binary = binary
        self.extra_args = extra_args
        self.name = name
        self.image_id = ""
        # The attached clients' working directory: conmon drops files there (an "oom" marker when a
        # container hits its memory limit), which must not land wherever the server was started.
        self.workdir = ""
        self.copies = None if CopyCgroups.refusal(spec.runtime) else CopyCgroups.find()
        self.channels = Channels(name)

    @property
    def fork_refusal(self) -> str | None:
        return CopyCgroups.refusal(self.spec.runtime)

    @property
    def runtime_id(self) -> str:
        return f"{self.name}:{self.image_id}"

    def run_argv(self, slot: int) -> list[str]:
        spec = self.spec
        # Without explicit values podman may ask for more than the host lets a capability-less container
        # have and fail to start; 32768 (the usual pid_max) is as many processes as a host has anyway.
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = 32768 if hard == resource.RLIM_INFINITY else min(32768, hard)
        forks = self.copies is not None and slot >= self.max_workers  # a session's container, which may fork
        pids = spec.pids_of(slot, self.max_workers)
        argv = [self.binary, *runtime_flags(spec.runtime), "run", "-i", "--rm", "--name", spec.name(slot)]
        argv += ["--hostname", "sandbox"]
        for key, value in spec.labels().items():
            argv += ["--label", f"{key}={value}"]
        argv += [
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--read-only",
            "--read-only-tmpfs=false",  # podman would add writable /tmp, /var/tmp and /run otherwise
            "--pids-limit",
            str(pids),
            "--memory",
            f"{spec.memory_mb}m",
            "--memory-swap",  # memory and swap together: no swap past the limit (podman's default doubles it)
            f"{spec.memory_mb}m",
            "--cpus",
            str(spec.cpus),
            "--ulimit",
            f"nofile={spec.open_files}:{spec.open_files}",
            # RLIMIT_NPROC counts a uid's processes host-wide: the pids limit is what bounds a container.
            "--ulimit",
            f"nproc={nproc}:{nproc}",
            "--user",
            AGENT_USER,
            "--log-driver",
            "none",
        ]
        for cap in CAPABILITIES + (SESSION_CAPABILITIES if forks else ()):
            argv += ["--cap-add", cap]
        if self.copies is not None and forks:
            for outside, inside in zip(self.copies.paths(spec.name(slot)), CopyCgroups.INSIDE, strict=True):
                argv += ["--volume", f"{outside}:{inside}:rw"]
            # Its processes see their own user's alone in /proc, as in the local backend's box: a copy is another
            # user than its siblings and its session, and sees none of theirs.
            argv += ["--security-opt", "proc-opts=hidepid=invisible"]
        for path, options in spec.tmpfs.items():
            argv += ["--tmpfs", f"{path}:{options}"]
        # What the local backend's box masks too: /proc files that show the whole machine (see isolation.MASKED).
        argv += ["--security-opt", "mask=" + ":".join(MASKED)]
        return [*argv, *self.extra_args, spec.image]

    def make_worker(self, slot: int) -> AgentWorker:
        name, argv = self.spec.name(slot), self.run_argv(slot)
        if self.copies is None or slot < self.max_workers:
            return PodmanWorker(slot, self.config, argv, self.binary, name, self.workdir, channels=self.channels)
        # A copy's processes: a session's, and its agent's (each member's is moved into its copy's pids cgroup).
        most = (self.spec.session_processes or self.spec.pids_of(slot, self.max_workers)) + 1
        config: WorkerConfig = {**self.config, "copies": list(CopyCgroups.INSIDE), "copy_processes": most}
        return PodmanWorker(
            slot, config, argv, self.binary, name, self.workdir, self.copies, self.spec.cpus, self.channels
        )

    async def start(self) -> None:
        if shutil.which(self.binary) is None:
            raise SandboxFault(f"{self.name}: {self.binary!r} is not installed")
        code, out, err = await _podman(self.binary, "image", "inspect", "--format", "{{.Id}}", self.spec.image)
        if code != 0:
            raise SandboxFault(
                f"{self.name}: image {self.spec.image!r} not found ({err.decode(errors='replace').strip()}); build "
                f"it with `{self.binary} build -f services/sandbox/runtime/Dockerfile -t {self.spec.image} "
                "services/sandbox`"
            )
        self.image_id = out.decode().strip()
        await self._remove_stale()
        self.workdir = tempfile.mkdtemp(prefix=f"codegym-{self.name}-{self.spec.server_id}-")
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    async def _remove_stale(self) -> None:
        await remove_stale(self.binary, self.name)
        if self.copies is not None:  # copies' cgroups of servers gone (killed before they removed them)
            await asyncio.to_thread(self.copies.sweep)
