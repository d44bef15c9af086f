"""ASGI middleware that cancels a request's work as soon as its client goes away.

Starlette and uvicorn run a handler to its end whether or not anyone still waits for the answer, so an
abandoned ``/v1/evaluate`` kept its runs queued and running, and the next client waited behind them. Here
the handler runs in a task of its own, and once the body is read, the server's next message says when the
connection closes: the task is then cancelled, and with it every run it awaits. A run still queued leaves
the queue; a run on a worker has that worker's agent killed and replaced (``WorkerPool._on_worker``), as
after a missed deadline, since the agent answers one request frame with one answer frame and cannot be
interrupted in between. A cancelled run never reaches the result cache.

Plain ASGI, for POST requests only (the routes that run programs): the health routes stay as cheap as they were.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..metrics import Metrics


class CancelOnDisconnect:
    """Runs each POST request's handler in a task, cancelled when the client disconnects before the answer."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        answered = False  # once the answer has started, a disconnect is the end of the exchange, not a client gone
        gone = False
        watcher: asyncio.Task[None] | None = None

        async def watch() -> None:
            nonlocal gone
            # With the body read, the server's next message is http.disconnect: when the connection closes,
            # or once the answer is complete (uvicorn, and the test clients, say so then too).
            while (await receive())["type"] != "http.disconnect":
                pass
            if not answered:
                gone = True
                handler.cancel()

        async def receiving() -> Message:
            nonlocal watcher
            message = await receive()
            body_read = message["type"] == "http.request" and not message.get("more_body", False)
            if body_read and watcher is None:
                watcher = asyncio.create_task(watch())
            return message

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        async def serve() -> None:
            await self.app(scope, receiving, sending)

        handler = asyncio.create_task(serve())
        try:
            await handler
        except asyncio.CancelledError:
            # Re-raised when this task itself is cancelled (the server stopping), swallowed when the client
            # went away: there is nobody to answer.
            task = asyncio.current_task()
            if not gone or (task is not None and task.cancelling()):
                raise
            self.metrics.abandoned.inc()
        finally:
            if watcher is not None:
                watcher.cancel()
