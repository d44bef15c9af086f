"""The docker backend: persistent containers made with the Docker SDK, one per slot.

The channel to each agent is a socket of the server's own, mounted into its container (``agent_channel.py``), or
where the agent cannot reach it, the container's attached stream (one long-lived HTTP upgrade to the daemon):
frames go to the agent's stdin, its stdout comes back multiplexed with its stderr in Docker's 8-byte-header
framing, which :class:`DockerWorker` takes apart. The attached stream is held either way: the agent's stderr
comes on it, and its end is the container's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from typing import Any

from ..agent.isolation import MASKED
from ..agent.protocol import WorkerConfig
from .agent_channel import INSIDE, AgentChannel, Channels, peer_pid
from .base import SandboxFault
from .containers import (
    AGENT_USER,
    CAPABILITIES,
    LABEL,
    PROC_CAPABILITIES,
    SESSION_CAPABILITIES,
    ContainerSpec,
    CopyCgroups,
    is_stale,
)
from .pool import WorkerPool
from .worker import START_TIMEOUT_S, AgentWorker
from .worker_cost import parent_pid

log = logging.getLogger("codegym.sandbox.docker")

# The paths docker masks in every container (moby's ``oci.DefaultSpec``, Docker 20.10 to 28): a container that
# names its own replaces that list, so they are named again here, with the /proc files the local backend's box
# masks (``isolation.MASKED``: the kernel's command line, its symbols, the machine's counts). A path a kernel
# lacks is left alone by the runtime.
ENGINE_MASKED = (
    "/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
    "/sys/devices/virtual/powercap",
)  # fmt: skip
MASKED_PATHS = (*ENGINE_MASKED, *MASKED)


def _own_socket(attached: Any) -> socket.socket:
    """A socket of our own for the attached stream, with docker-py's wrappers closed.

    docker-py hands back a file wrapper whose socket stays referenced by the HTTP response: closing that
    socket would not close its descriptor, and the server would leak one per container.
    """
    inner: socket.socket = getattr(attached, "_sock", attached)
    own = inner.dup()
    closables: list[Any] = [attached, inner, getattr(attached, "_response", None)]
    for obj in closables:
        with contextlib.suppress(Exception):
            obj.close()
    return own


class DockerWorker(AgentWorker):
    def __init__(
        self, slot: int, config: WorkerConfig, backend: DockerBackend, copies: CopyCgroups | None = None
    ) -> None:
        super().__init__(slot, config)
        self.backend = backend
        self.copies = copies  # a session's container: its copies' cgroups, made before it starts
        self.container: Any = None
        self._pump: asyncio.Task[None] | None = None
        self._raw: socket.socket | None = None
        self._attached: asyncio.StreamWriter | None = None  # the attached stream's, where the channel is a socket
        self._gone = asyncio.Event()

    def _create(self) -> tuple[Any, socket.socket, socket.socket | None]:
        """The container, started; its attached stream; and the agent's own socket (None: the channel is the
        attached stream)."""
        channel = self.backend.channels.open(self.slot)
        try:
            try:
                container = self._make(channel)
            except Exception as exc:
                # A server whose directories the daemon does not see (one in a container of its own): its later
                # containers are made without a socket, and this one again.
                if channel is None or "bind source path does not exist" not in str(exc):
                    raise
                self.backend.channels.off("the daemon cannot mount the server's directories")
                channel.close()
                channel = None
                container = self._make(None)
            return self._start(container, channel)
        finally:
            if channel is not None:
                channel.close()

    def _make(self, channel: AgentChannel | None) -> Any:
        import docker.types

        spec = self.backend.spec
        client = self.backend.client
        name = spec.name(self.slot)
        with contextlib.suppress(Exception):  # a leftover of this slot from an earlier life
            client.containers.get(name).remove(force=True)
        caps, volumes = list(CAPABILITIES), {}
        if self.copies is not None:  # a session's container, which may fork: see PodmanBackend.run_argv
            caps += [*SESSION_CAPABILITIES, *PROC_CAPABILITIES]
            outside = self.copies.make(name, spec.cpus)
            pairs = zip(outside, CopyCgroups.INSIDE, strict=True)
            volumes = {path: {"bind": inside, "mode": "rw"} for path, inside in pairs}
        # A bind that is not made where its source is missing (a volume's would be, on the daemon's host).
        mounts = [] if channel is None else [docker.types.Mount(INSIDE, channel.directory, "bind", read_only=True)]
        # The API's low-level calls: the SDK's ``containers.create`` cannot name the masked paths.
        host_config = client.api.create_host_config(
            network_mode="none",
            runtime=spec.runtime or None,  # None: the daemon's default
            cap_drop=["ALL"],
            cap_add=caps,
            binds=volumes,
            mounts=mounts,
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs=spec.tmpfs,
            pids_limit=spec.pids_of(self.slot, self.backend.max_workers),
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9),
            ulimits=[docker.types.Ulimit(name="nofile", soft=spec.open_files, hard=spec.open_files)],
        )
        host_config["MaskedPaths"] = list(MASKED_PATHS)
        made = client.api.create_container(
            spec.image,
            name=name,
            labels=spec.labels(),
            hostname="sandbox",
            user=AGENT_USER,
            stdin_open=True,
            # Not detached: the container's stdin then closes (StdinOnce) as its one attached client goes. The
            # agent (its init) reads the end of its channel and takes its box down, the container with it. Left
            # open, every container of a server killed outright (its sessions' among them) ran on, with its
            # processes, until a later server swept it.
            detach=False,
            tty=False,
            environment=channel.environment if channel is not None else {},
            host_config=host_config,
        )
        return client.containers.get(made["Id"])

    def _start(self, container: Any, channel: AgentChannel | None) -> tuple[Any, socket.socket, socket.socket | None]:
        raw: socket.socket | None = None
        try:
            # Attach before start, so that nothing the agent says is missed.
            attached = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            raw = _own_socket(attached)
            container.start()
            own = channel.wait(raw, START_TIMEOUT_S) if channel is not None else None
        except Exception:
            if raw is not None:
                raw.close()
            with contextlib.suppress(Exception):  # the engine may be going away: the error above says why
                container.remove(force=True)
            raise
        if channel is not None and own is None:
            self.backend.channels.off("an agent cannot reach the server's socket")
        self.seen_pid = 0 if own is None else peer_pid(own)
        return container, raw, own

    async def _open(self) -> None:
        creating = asyncio.ensure_future(asyncio.to_thread(self._create))
        try:
            self.container, raw, own = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # Cancelled (the pool stops): the thread goes on. Wait for it (a container start, a second or
            # so) and remove what it made: the loop may be gone by the time it ends otherwise, and its
            # container would run on with its socket open.
            with contextlib.suppress(Exception):
                container, made, socket_ = await creating
                made.close()
                if socket_ is not None:
                    socket_.close()
                await asyncio.to_thread(container.remove, force=True)
            raise
        except Exception as exc:
            raise SandboxFault(f"docker: cannot start a container from {self.backend.spec.image!r}: {exc}") from exc
        self._raw = raw  # closed by kill() whatever happens next (the transport closes it too, when there is one)
        raw.setblocking(False)
        stream, attached = await asyncio.open_connection(sock=raw, limit=1 << 20)
        out: asyncio.StreamReader | None = None
        if own is None:
            self.writer, self.reader = attached, asyncio.StreamReader(limit=1 << 20)
            out = self.reader
        else:
            self._attached = attached
            own.setblocking(False)
            self.reader, self.writer = await asyncio.open_connection(sock=own, limit=1 << 20)
        self._pump = asyncio.get_running_loop().create_task(self._demux(stream, out))

    async def _demux(self, stream: asyncio.StreamReader, out: asyncio.StreamReader | None) -> None:
        """Split Docker's multiplexed stream: stdout feeds the frame reader (``out``, where the channel is this
        stream), stderr goes to the log."""
        try:
            while True:
                head = await stream.readexactly(8)
                kind, size = head[0], struct.unpack(">I", head[4:])[0]
                data = await stream.readexactly(size)
                if kind == 1 and out is not None:
                    out.feed_data(data)
                else:
                    log.warning("worker %d: %s", self.slot, data.decode(errors="replace").rstrip())
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            if out is not None:
                out.feed_eof()
            self._gone.set()

    @property
    def alive(self) -> bool:
        return self.container is not None and not self._gone.is_set()

    def engine_pids(self) -> list[int]:
        return [parent_pid(self.seen_pid)] if self.seen_pid else []  # the container's containerd-shim

    async def wait_exited(self) -> None:
        await self._gone.wait()

    async def kill(self) -> None:
        for writer in (self.writer, self._attached):
            if writer is not None:
                writer.close()
                # Let the transport really close its socket before the loop may stop (server shutdown).
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), 5)
        if self._raw is not None:
            self._raw.close()
        container, self.container = self.container, None
        if container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove, force=True)
        if self.copies is not None:
            await asyncio.to_thread(self.copies.remove, self.backend.spec.name(self.slot))
        if self._pump is not None:
            await asyncio.gather(self._pump, return_exceptions=True)


def remove_stale(client: Any) -> None:
    """Remove the containers of servers on this host that are gone (killed before they removed theirs): their
    programs' processes would hold their uids (see ``program_users.in_use``) and their memory."""
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if is_stale(container.labels):
            log.warning("docker: removing %s, left behind by a server that is gone", container.name)
            with contextlib.suppress(Exception):
                container.remove(force=True)


def remove_stale_now() -> None:
    """:func:`remove_stale`, with a client of its own (before a backend is made); nothing where docker does not
    answer (the backend's start says why)."""
    import docker

    try:
        client = docker.from_env(timeout=60)
    except Exception:
        return
    try:
        remove_stale(client)
    except Exception:
        pass
    finally:
        client.close()


class DockerBackend(WorkerPool):
    name = "docker"
    starts_ahead = False  # see WorkerPool.starts_ahead
    least_worker_cost_mb = 32  # see worker_cost.py

    def __init__(self, workers: int, queue_size: int, config: WorkerConfig, spec: ContainerSpec) -> None:
        super().__init__(workers, queue_size, {**config, "namespaces": False})
        self.spec = spec
        self.client: Any = None
        self.image_id = ""
        self.copies = None if CopyCgroups.refusal(spec.runtime) else CopyCgroups.find()
        self.channels = Channels("docker")

    @property
    def fork_refusal(self) -> str | None:
        return CopyCgroups.refusal(self.spec.runtime)

    @property
    def runtime_id(self) -> str:
        return f"docker:{self.image_id}"

    def make_worker(self, slot: int) -> AgentWorker:
        if self.copies is None or slot < self.max_workers:
            return DockerWorker(slot, self.config, self)
        # As PodmanBackend's, and the agent remounts its /proc to hide each user's processes from the others.
        most = (self.spec.session_processes or self.spec.pids_of(slot, self.max_workers)) + 1
        config: WorkerConfig = {
            **self.config,
            "copies": list(CopyCgroups.INSIDE),
            "copy_processes": most,
            "hide_processes": True,
        }
        return DockerWorker(slot, config, self, self.copies)

    def _connect(self) -> None:
        import docker

        self.client = docker.from_env()
        self.client.ping()
        try:
            self.image_id = self.client.images.get(self.spec.image).id
        except docker.errors.ImageNotFound:
            raise SandboxFault(
                f"docker: image {self.spec.image!r} not found; build it with "
                f"`docker build -f services/sandbox/runtime/Dockerfile -t {self.spec.image} services/sandbox`"
            ) from None
        remove_stale(self.client)
        if self.copies is not None:  # copies' cgroups of servers gone (killed before they removed them)
            self.copies.sweep()

    async def start(self) -> None:
        await asyncio.to_thread(self._connect)
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self.client is not None:
            await asyncio.to_thread(self.client.close)
