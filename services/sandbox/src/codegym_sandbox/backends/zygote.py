"""The server's side of the agent zygote (see ``agent/worker_zygote.py``): workers forked, not exec'd.

:class:`Zygote` starts the zygote process and asks it for agents; :class:`ForkedWorker` is a worker whose
agent came from it, spoken to over two pipes and watched through a pidfd (the zygote, not the server, is
its parent, so the server cannot wait for it). Where the kernel has no pidfds (before Linux 5.3), the local
backend starts each agent as an interpreter of its own instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct

from ..agent.protocol import WorkerConfig
from .base import SandboxFault
from .worker import AgentWorker, tree_demand_s


def pidfds_work() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


class Zygote:
    """One zygote process, started on first use and again if it died."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None
        self.closed = False  # the backend stopped: no zygote is started again
        self._lock = asyncio.Lock()

    async def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                str(theirs.fileno()),
                str(os.getpid()),
                pass_fds=(theirs.fileno(),),
                env=self.env,
                cwd=self.cwd,
                stdin=asyncio.subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours

    async def fork(self, stdin: int, stdout: int) -> int:
        """A new agent on ``stdin`` and ``stdout`` (the zygote gets copies); its pid. A zygote found dead
        (killed, or gone with a broken pipe) is started again once, for this very fork."""
        async with self._lock:
            if self.closed:
                raise SandboxFault("the local backend is stopping")
            for attempt in range(2):
                if self.proc is None or self.proc.returncode is not None or self.sock is None:
                    await self.stop()
                    await self._start()
                assert self.sock is not None
                sock = self.sock
                loop = asyncio.get_running_loop()
                try:
                    # A fork takes the zygote a millisecond or two: wait for it off the event loop.
                    await loop.run_in_executor(None, socket.send_fds, sock, [b"fork"], [stdin, stdout])
                    answer = await loop.run_in_executor(None, sock.recv, 4)
                except OSError as exc:
                    await self.stop()
                    if attempt == 0:
                        continue
                    raise SandboxFault(f"the agent zygote went away: {exc}") from exc
                if len(answer) == 4 and (pid := struct.unpack("<i", answer)[0]) > 0:
                    return int(pid)
                await self.stop()
                if attempt == 1 or answer:  # a fork that failed, not a zygote that died
                    raise SandboxFault("the agent zygote could not fork")
        raise SandboxFault("the agent zygote could not fork")  # not reached: the loop returns or raises

    async def close(self) -> None:
        """Stop the zygote for good (the backend stops)."""
        self.closed = True
        await self.stop()

    async def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self.proc = None


class ForkedWorker(AgentWorker):
    """An agent forked by the zygote: two pipes to it, and a pidfd that says when it has gone."""

    def __init__(self, slot: int, config: WorkerConfig, zygote: Zygote) -> None:
        super().__init__(slot, config)
        self.zygote = zygote
        self.pid = 0
        self._pidfd = -1
        self._exited = asyncio.Event()
        self._read_transport: asyncio.ReadTransport | None = None

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        to_agent_r, to_agent_w = os.pipe()
        from_agent_r, from_agent_w = os.pipe()
        try:
            self.pid = await self.zygote.fork(to_agent_r, from_agent_w)
        except BaseException:
            for fd in (to_agent_w, from_agent_r):
                os.close(fd)
            raise
        finally:
            os.close(to_agent_r)
            os.close(from_agent_w)
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # gone already (it was forked a moment ago: nobody else has its pid)
            self._exited.set()
        else:
            loop.add_reader(self._pidfd, self._on_exit)
        reader = self.reader = asyncio.StreamReader(limit=1 << 20)
        try:
            self._read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader),
                open(from_agent_r, "rb", 0),  # noqa: SIM115
            )
        except BaseException:
            os.close(to_agent_w)  # the other end is the transport's: closed with it
            raise
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
            open(to_agent_w, "wb", 0),  # noqa: SIM115
        )
        self.writer = asyncio.StreamWriter(transport, protocol, None, loop)

    def _on_exit(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._exited.set()

    @property
    def alive(self) -> bool:
        return self.pid > 0 and not self._exited.is_set()

    def demand_s(self) -> float | None:
        return tree_demand_s(self.pid) if self.alive else None

    def own_pid(self) -> int:
        return self.pid

    async def wait_exited(self) -> None:
        await self._exited.wait()

    async def kill(self) -> None:
        if self.pid > 0 and not self._exited.is_set():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            await self._exited.wait()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self._read_transport is not None:
            self._read_transport.close()
            self._read_transport = None
