"""A worker whose start or end is cancelled (a request gone, the pool stopping) leaves nothing behind: its agent
is killed and its channel's transports are closed at once, not found open later by the garbage collector (which
warns in whatever test happens to run then)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from codegym_sandbox.backends.zygote import ForkedWorker
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie of the zygote's, not yet reaped
    except FileNotFoundError:
        return True


def test_a_start_cancelled_before_the_agent_answers_kills_it_and_closes_its_pipes() -> None:
    with TestClient(create_app(Settings(backend="local", workers=1, max_workers=1))) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]

        async def cancelled_start() -> ForkedWorker:
            worker = backend.make_worker(0)
            assert isinstance(worker, ForkedWorker)

            async def never(*_: object) -> tuple[dict[str, object], list[bytes]]:
                await asyncio.Event().wait()  # an agent that never says it is ready
                raise AssertionError("not reached")

            worker._read = never  # type: ignore[method-assign]
            starting = asyncio.ensure_future(worker.start())
            while worker.writer is None:  # forked, its channel open: waiting for "ready"
                await asyncio.sleep(0.005)
            starting.cancel()
            try:
                await starting
            except asyncio.CancelledError:
                pass
            return worker

        worker = client.portal.call(cancelled_start)  # type: ignore[union-attr]
        assert worker.pid > 0 and _gone(worker.pid)
        assert worker._read_transport is None and worker.writer is None


def test_an_end_cancelled_in_its_grace_still_kills_the_agent_and_closes_its_pipes() -> None:
    with TestClient(create_app(Settings(backend="local", workers=1, max_workers=1))) as client:
        backend = client.app.state.executor.backend  # type: ignore[attr-defined]

        async def cancelled_end() -> ForkedWorker:
            worker = backend.make_worker(0)
            await worker.start()
            # Stopped, the agent cannot see its channel close: the end waits out its grace, and is cancelled in it.
            os.kill(worker.pid, signal.SIGSTOP)
            ending = asyncio.ensure_future(worker.end(30.0))
            await asyncio.sleep(0.2)
            ending.cancel()
            try:
                await ending
            except asyncio.CancelledError:
                pass
            try:
                await asyncio.wait_for(worker.wait_exited(), 10)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)  # left stopped where the end did not kill it
            return worker

        worker = client.portal.call(cancelled_end)  # type: ignore[union-attr]
        assert _gone(worker.pid)
        assert worker._read_transport is None and worker.writer is None
