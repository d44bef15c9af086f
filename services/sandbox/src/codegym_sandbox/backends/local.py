"""The local backend: a pool of agent processes on this host, isolated with Linux namespaces.

Each slot is one long-lived agent (``python -m codegym_sandbox.agent``) spoken to over its stdin and
stdout. A slot serves one run at a time; runs wait in a bounded queue for a free slot. An agent that
dies or stops answering is replaced in the background and the run it held gets a SandboxFault.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
import sys
from collections.abc import Coroutine
from typing import Any

from ..agent.protocol import decode_header, encode_frame
from .base import RunOutcome, RunRequest, SandboxFault, Saturated

log = logging.getLogger("codegym.sandbox.local")

_ANSWER_GRACE_S = 15.0  # beyond a run's own wall limit, how long an agent may take to answer


def agent_env() -> dict[str, str]:
    """The agent's environment, which every Python run inherits: small, fixed and deterministic."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": src,
        "PYTHONHASHSEED": "0",  # the same program prints the same set order on every worker
        "PYTHONDONTWRITEBYTECODE": "1",
        "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MiB of address space per thread arena otherwise
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class Worker:
    """One agent process and the channel to it."""

    def __init__(self, slot: int, python: str, config: dict[str, Any]) -> None:
        self.slot = slot
        self.python = python
        self.config = config
        self.proc: asyncio.subprocess.Process | None = None
        self.runs = 0
        self.replaced = False  # set once a replacement is on its way: never hand this one a run again

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            self.python, "-s", "-m", "codegym_sandbox.agent",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=agent_env(),
            limit=1 << 20,
        )  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(self.config))
        header, _ = await asyncio.wait_for(self._read(), 60)
        if header.get("op") != "ready":
            await self.kill()
            raise SandboxFault(f"worker {self.slot} could not start: {header.get('error', header)}")

    async def _read(self) -> tuple[dict[str, Any], list[bytes]]:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        try:
            (size,) = struct.unpack(">I", await out.readexactly(4))
            header = decode_header(await out.readexactly(size))
            blobs = [await out.readexactly(n) for n in header.get("blobs", [])]
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise SandboxFault(f"worker {self.slot} went away") from exc
        return header, blobs

    async def run(self, req: RunRequest) -> RunOutcome:
        assert self.proc is not None and self.proc.stdin is not None
        blobs: list[bytes] = []
        files = []
        for name, (data, mode) in req.files.items():
            files.append([name, mode, len(blobs)])
            blobs.append(data)
        header: dict[str, Any] = {
            "op": "run", "files": files, "argv": req.argv, "env": req.env, "limits": req.limits,
            "python": req.python, "collect": req.collect,
        }  # fmt: skip
        if req.stdin:
            header["stdin"] = len(blobs)
            blobs.append(req.stdin)
        self.proc.stdin.write(encode_frame(header, blobs))
        answer_by = req.limits["wall_s"] + _ANSWER_GRACE_S
        try:
            await self.proc.stdin.drain()
            result, out = await asyncio.wait_for(self._read(), answer_by)
        except (asyncio.TimeoutError, ConnectionError) as exc:
            raise SandboxFault(f"worker {self.slot} did not answer") from exc
        self.runs += 1
        if result.get("op") != "result":
            raise SandboxFault(f"worker {self.slot}: {result.get('error', 'bad answer')}")
        collected = {name: (out[2 + i], mode) for name, mode, i in result.get("collected", [])}
        return RunOutcome(
            exit_code=result["exit_code"], signal=result["signal"], wall_s=result["wall"], cpu_s=result["cpu"],
            max_rss_kb=result.get("max_rss_kb"), timed_out=result["timed_out"],
            output_exceeded=result["output_exceeded"], stdout=out[0], stderr=out[1],
            launch_error=result.get("error"), collected=collected,
        )  # fmt: skip

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


class LocalBackend:
    """A fixed number of workers behind a bounded wait queue."""

    name = "local"

    def __init__(self, workers: int, queue_size: int, config: dict[str, Any], python: str | None = None) -> None:
        self.size = workers
        self.queue_size = queue_size
        self.config = config
        self.python = python or sys.executable
        self._idle: asyncio.Queue[Worker] = asyncio.Queue()
        self._workers: list[Worker] = []
        self.waiting = 0
        self.restarts = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    @property
    def busy(self) -> int:
        return self.size - self._idle.qsize()

    async def start(self) -> None:
        self._workers = [Worker(i, self.python, self.config) for i in range(self.size)]
        await asyncio.gather(*(w.start() for w in self._workers))
        for w in self._workers:
            self._idle.put_nowait(w)
            self._watch(w)
        log.info("local backend: %d workers ready", self.size)

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(w.kill() for w in self._workers), return_exceptions=True)

    async def run(self, request: RunRequest) -> RunOutcome:
        if self._idle.empty() and self.waiting >= self.queue_size:
            raise Saturated(retry_after_s=1)
        self.waiting += 1
        try:
            worker = await self._idle.get()
            while worker.replaced or worker.proc is None or worker.proc.returncode is not None:
                self._replace(worker)  # died while idle (killed from outside): never hand it a run
                worker = await self._idle.get()
        finally:
            self.waiting -= 1
        healthy = False
        try:
            outcome = await worker.run(request)
            healthy = True
            return outcome
        finally:
            if healthy and not worker.replaced:
                self._idle.put_nowait(worker)
            else:
                self._replace(worker)

    def _replace(self, worker: Worker) -> None:
        if worker.replaced or self._stopping:
            return
        worker.replaced = True
        # Take it out of the idle queue now, so that busy counts and the saturation check stay true.
        idle = [self._idle.get_nowait() for _ in range(self._idle.qsize())]
        for w in idle:
            if w is not worker:
                self._idle.put_nowait(w)

        async def replace() -> None:
            self.restarts += 1
            await worker.kill()
            fresh = Worker(worker.slot, self.python, self.config)
            delay = 0.1
            while True:
                try:
                    await fresh.start()
                    break
                except Exception as exc:
                    log.error("worker %d failed to restart: %s", worker.slot, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)
            self._workers[worker.slot] = fresh
            self._idle.put_nowait(fresh)
            self._watch(fresh)

        self._spawn(replace())

    def _watch(self, worker: Worker) -> None:
        """Replace a worker as soon as its agent exits, idle or not: readiness must not wait for a run."""

        async def watch() -> None:
            assert worker.proc is not None
            await worker.proc.wait()
            self._replace(worker)

        self._spawn(watch())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def status(self) -> dict[str, Any]:
        alive = sum(1 for w in self._workers if w.proc is not None and w.proc.returncode is None)
        return {
            "backend": self.name, "workers": self.size, "alive": alive, "busy": self.busy,
            "queued": self.waiting, "restarts": self.restarts,
        }  # fmt: skip
