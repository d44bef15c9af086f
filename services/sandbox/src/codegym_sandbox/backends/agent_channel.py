"""A socket of the server's own for the agent in a container (``agent/channel.py``), past the engine.

A container's attached stream runs through the engine's daemon and its shim, which copy every frame twice each
way: some half a millisecond of every cell's round trip. So the server binds a socket for each agent in a
directory of its own (mode 0700, the server's user's: a server run as root shares it with the container's root,
its owner, and with no program's user), has it mounted into the container, and takes the agent's connection to it
as the channel. Where the agent cannot reach it (a server of another user; an engine that maps the container's
root to another host user), it says so on the attached stream (one byte, :data:`~..agent.channel.NO_CHANNEL`,
before anything else of its own) and the channel stays that stream: :meth:`AgentChannel.wait` reads which.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import socket
import struct
import tempfile
import time

from ..agent.channel import CHANNEL_ENV, NO_CHANNEL

log = logging.getLogger("codegym.sandbox.channel")

INSIDE = "/run/codegym-channel"  # where the directory is mounted in the container
_NAME = "agent.sock"


class Channels:
    """Whether a backend gives its agents sockets of the server's: yes, until one could not use its own (the next
    would not either)."""

    def __init__(self, engine: str) -> None:
        self.engine, self.on = engine, True

    def open(self, slot: int) -> AgentChannel | None:
        """A channel for the agent of ``slot``, while they are on; none where one cannot be made here (no /tmp
        to make it in, say), and none from then on."""
        if not self.on:
            return None
        try:
            return AgentChannel(slot)
        except OSError as exc:
            self.off(f"no socket can be made for them ({exc})")
            return None

    def off(self, why: str) -> None:
        if self.on:
            log.info("%s: %s: agents talk over their containers' streams", self.engine, why)
            self.on = False


def peer_pid(conn: socket.socket) -> int:
    """The pid of the process at the other end of ``conn`` as this process sees it: a container's agent's on the
    host, where the server shares the host's pid namespace; 0 where the server cannot see it (itself in a
    container of its own)."""
    try:
        pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return 0
    return int(pid)


class AgentChannel:
    """A listening socket in a directory of its own (:attr:`directory`), for one agent."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        # In /tmp whatever TMPDIR says: a socket's path has at most 107 bytes, and the container's mount table shows
        # its programs where the directory is on the host (a random name here, and nothing of the server's).
        self.directory = tempfile.mkdtemp(prefix="codegym-agent-", dir="/tmp")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self.listener.bind(os.path.join(self.directory, _NAME))
            self.listener.listen(1)
        except OSError:
            self.close()
            raise

    @property
    def environment(self) -> dict[str, str]:
        """What tells the agent where its socket is."""
        return {CHANNEL_ENV: f"{INSIDE}/{_NAME}"}

    def wait(self, attached: socket.socket, timeout_s: float) -> socket.socket | None:
        """The agent's connection, or None where it said on ``attached`` (the container's attached stream, in
        Docker's multiplexed framing, blocking) that it could not connect. What it wrote on its stderr first is
        logged. :class:`OSError` where the container ends first, or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.listener, attached], [], [], left)
            if self.listener in ready:
                conn, _ = self.listener.accept()
                conn.set_inheritable(False)
                return conn
            if attached in ready:
                attached.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    head = _exactly(attached, 8)
                    data = _exactly(attached, struct.unpack(">I", head[4:])[0])
                finally:
                    attached.settimeout(None)
                if head[0] == 1:
                    if data != NO_CHANNEL:
                        raise OSError(f"the agent wrote {data[:64]!r} before its channel was open")
                    return None
                log.warning("worker %d: %s", self.slot, data.decode(errors="replace").rstrip())
        raise OSError(f"the agent did not connect to its channel within {timeout_s:g} s")

    async def wait_beside(self, stdout: asyncio.StreamReader, timeout_s: float) -> socket.socket | None:
        """:meth:`wait`, where the container's stdout is a plain stream (an engine's client attached to it): the
        agent's connection, or None where it wrote :data:`NO_CHANNEL` there first."""
        self.listener.setblocking(False)
        accepting = asyncio.ensure_future(asyncio.get_running_loop().sock_accept(self.listener))
        said = asyncio.ensure_future(stdout.readexactly(len(NO_CHANNEL)))
        try:
            await asyncio.wait({accepting, said}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (accepting, said):
                if not waiting.done():
                    waiting.cancel()
        if accepting.done() and not accepting.cancelled():
            conn, _ = accepting.result()
            conn.set_inheritable(False)
            return conn
        if said.done() and not said.cancelled():
            try:
                data = said.result()
            except asyncio.IncompleteReadError:
                raise OSError("the container ended before its agent opened its channel") from None
            if data != NO_CHANNEL:
                raise OSError(f"the agent wrote {data!r} before its channel was open")
            return None
        raise OSError(f"the agent did not connect to its channel within {timeout_s:g} s")

    def close(self) -> None:
        """Close the socket and remove its directory: once the agent is connected, nothing else may connect."""
        self.listener.close()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, _NAME))
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        got = sock.recv(n - len(data))
        if not got:
            raise OSError("the container's stream ended: its agent is gone")
        data += got
    return data
