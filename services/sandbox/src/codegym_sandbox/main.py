"""The FastAPI application: lifespan (worker pool), routes, error handlers."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from . import invalid_requests
from .api import execute_batch, fusion, health, jupyter, native, nemo_skills, sessions
from .api.disconnect import CancelOnDisconnect
from .api.files import BadFiles
from .api.guard import RELAYED, Guard, refusal_status
from .backends.base import Saturated, TooLarge
from .backends.choose import choose_backend
from .config import Settings, get_settings
from .executor import Executor
from .judging import off_loop
from .metrics import Metrics
from .sessions.errors import Busy, FilesTooLarge, SessionGone, TooManySessions
from .sessions.forks import ForkNotOffered, ForkRefused, TooManyCopies
from .sessions.repeats import KeyReused
from .sessions.store import SessionStore

log = logging.getLogger("codegym.sandbox")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend, reason = await choose_backend(settings)
        log.info("sandbox backend: %s (%s)", backend.name, reason)
        try:
            await backend.start()
        except BaseException:
            if backend.release_uids is not None:  # a server that did not start holds its programs' uids no more
                backend.release_uids()
            raise
        app.state.backend_reason = reason
        # What the server parses of a request (a pytest file) it parses in its analysis pool, off the loop.
        analyse = functools.partial(off_loop.analysed, backend.memory, linear=False)  # a split compiles
        app.state.executor = Executor(backend, settings, metrics, analyse)
        app.state.sessions = SessionStore(backend, app.state.executor, settings.sessions, settings.server_id)
        app.state.sessions.start()
        metrics.track_pool(lambda: backend.waiting, lambda: backend.busy, backend.size)
        try:
            yield
        finally:
            await app.state.sessions.stop()
            await backend.stop()
            off_loop.shutdown()

    app = FastAPI(title="codegym sandbox", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.metrics = metrics
    app.include_router(fusion.router)
    app.include_router(execute_batch.router)
    app.include_router(jupyter.router)
    app.include_router(native.router)
    app.include_router(sessions.router)
    app.include_router(nemo_skills.router)
    app.include_router(health.router)
    _include_datasets(app, settings)

    @app.exception_handler(BadFiles)
    async def bad_files(_: Request, exc: BadFiles) -> JSONResponse:
        return JSONResponse({"detail": [{"type": "value_error", "loc": ["body", "files"], "msg": str(exc)}]}, 422)

    @app.exception_handler(Saturated)
    async def saturated(request: Request, exc: Saturated) -> JSONResponse:
        metrics.rejected.inc()
        status = refusal_status(request.url.path)
        return JSONResponse({"detail": str(exc)}, status_code=status, headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(TooManySessions)
    async def too_many_sessions(_: Request, exc: TooManySessions) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 429, headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(SessionGone)
    async def session_gone(_: Request, exc: SessionGone) -> JSONResponse:
        if not exc.ended:
            return JSONResponse({"detail": str(exc)}, 404)
        # ``ran``: the call's own cell was sent before its session ended (it ran, and its answer is lost): a caller
        # must not run it again elsewhere as though it never had.
        return JSONResponse({"detail": str(exc), "ran": exc.ran}, 410)

    @app.exception_handler(ForkNotOffered)
    async def fork_not_offered(_: Request, exc: ForkNotOffered) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 501)

    @app.exception_handler(ForkRefused)
    async def fork_refused(_: Request, exc: ForkRefused) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 409)

    @app.exception_handler(TooManyCopies)
    async def too_many_copies(_: Request, exc: TooManyCopies) -> JSONResponse:
        return JSONResponse({"detail": [{"type": "value_error", "loc": ["body", "n"], "msg": str(exc)}]}, 422)

    @app.exception_handler(Busy)
    async def session_busy(_: Request, exc: Busy) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 409)

    @app.exception_handler(KeyReused)
    @app.exception_handler(FilesTooLarge)
    @app.exception_handler(TooLarge)
    async def too_much_memory(_: Request, exc: TooLarge | FilesTooLarge | KeyReused) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 422)  # a request that could never run: not "busy, retry"

    app.add_exception_handler(RequestValidationError, invalid_requests.answer)

    @app.exception_handler(UnicodeEncodeError)
    async def not_unicode(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
        # JSON may carry lone surrogates ("\\ud800"), which no input of a task's (its tests, stdin, expected
        # output) can hold. A program's text can: it is judged as its bytes (``agent/program_bytes.py``).
        msg = "strings must be valid Unicode (a lone surrogate escape is not)"
        return JSONResponse({"detail": [{"type": "value_error", "loc": ["body"], "msg": msg}]}, 422)

    # Inside the guard (added first), so that a request cancelled here still leaves the guard's count.
    app.add_middleware(CancelOnDisconnect, metrics=metrics)
    token = settings.api_token.get_secret_value() if settings.api_token else None
    app.add_middleware(
        Guard,
        token=token,
        max_body=settings.max_body_bytes,
        metrics=metrics,
        max_client_requests=settings.max_client_requests,
        max_held=settings.max_held_bodies_mb << 20,
    )
    return app


def _include_datasets(app: FastAPI, settings: Settings) -> None:
    """SandboxFusion's dataset routes (``/get_prompts``, ``/submit``, ...), served from codegym's task library
    where the evaluator is installed (``codegym_evaluator.fusion_datasets``): the ``sandbox-fusion`` client's
    ``set_endpoint`` points both its sandbox and its dataset calls here. ``/submit`` runs its tests on this
    server, through the app itself (no port, no network)."""
    try:
        from codegym_evaluator.fusion_datasets import in_pool, make_router
    except ImportError:
        log.info("dataset routes off: codegym-evaluator is not installed (its service serves them too)")
        return
    from .client import AsyncSandboxClient, RetryPolicy

    no_retry = RetryPolicy(retries=0)

    token = settings.api_token.get_secret_value() if settings.api_token else None

    async def relayed(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, RELAYED: True}, receive, send)  # counted as the route that makes it (``guard.RELAYED``)

    def sandbox(request: Request) -> AsyncSandboxClient:
        # Its runs are its caller's, as the per-client limits, windows and turns tell clients apart: the transport's
        # own address (127.0.0.1) made every caller's /submit one client's (round 56).
        caller = (request.client.host, request.client.port) if request.client else ("unknown", 0)
        transport = httpx.ASGITransport(app=relayed, client=caller)
        # Never sent again: a relay refused for its caller's own share, sent four more times, encoded a 41 MB body
        # on the loop each time (round 62); its caller is told, and retries as it likes.
        return AsyncSandboxClient("http://sandbox", token=token, timeout=None, retry=no_retry, transport=transport)

    # A completion, and provided rows, are read in the analysis pool, charged to the budget in the caller's turn.
    app.include_router(make_router(sandbox, in_pool(lambda request: request.app.state.executor.backend.memory)))
