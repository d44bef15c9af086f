"""NeMo-Skills' sandbox, served unchanged on codegym: ``POST /execute``, ``GET /sessions``,
``DELETE /sessions/{id}``, ``GET /health``.

Their client (``nemo_skills/code_execution/sandbox.py``, and NeMo-Gym's ``ns_tools``) needs only a host and a
port. ``ipython`` cells run in a codegym session named by the ``X-Session-ID`` header, the client's own (one
per client address and id: another client sending the same id has a session of its own); ``python``, ``python3``,
``pypy3`` (run by CPython: codegym has no PyPy) and ``shell`` (bash) run as one stateless program each. Written
from their wire contract: the fields and defaults, the statuses, the messages and the 400 and 404 bodies are
theirs.

``new_session_created`` is true when the interpreter behind the id is new: the first call on an id, the first
after a DELETE or after codegym ended the session (its TTL, its memory, a crash, a cell it could not
interrupt), and the call during which it ended. Their client then replays its history of the id, which
restores a session lost with its worker. Unlike their server, codegym interrupts a cell at its time limit and
keeps the session: the answer is still ``timeout``, but the state stays (what the cell did before it was
stopped included), so ``new_session_created`` stays false and their client replays nothing. Their client waits
``timeout`` for an answer and no longer, so a cell's answer comes within it: the cell never stands paused to
lend its slot, gets no credit for time it waited for a CPU, and is interrupted a moment before its ``timeout``
has passed since the call came, its wait for its session and a slot counted (``sessions/cell_terms.py``).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

from ..backends.base import RunPolicy, Saturated
from ..executor import Executor
from ..quoting import QUOTED, quoted
from ..sessions.errors import SessionGone, TooManySessions
from ..sessions.store import Session, SessionStore
from ..sessions.wire import CellResult
from ..verdicts import RunEnd
from .deps import client_of
from .nemo_output import VERBOSITIES, cell_stdout, cut, stream

router = APIRouter()

# Their ids are the client's to choose: kept apart from native ids (the server's id, a dash, then letters,
# digits, ``-`` and ``_``), so that no header can name a native session.
_PREFIX = "nemo-skills:"
# Their client sends a uuid4 (36 characters). An id is remembered after its session ends (why it ended, and
# ``_Ids.restarted``), thousands of them: unbounded, ids up to a header's size would hold hundreds of MB.
MAX_ID_CHARS = 256
_STATELESS = {"python": "python", "python3": "python", "pypy3": "python", "shell": "bash"}
_NO_HEADER = "X-Session-ID header required for ipython sessions"
_LONG_ID = f"X-Session-ID is longer than {MAX_ID_CHARS} characters, the most this server takes"
# Their worker's words when its shell died under a cell.
_CONNECTION_CLOSED = "connection closed\n"
_RESTARTED_KEPT = 4096


class ExecuteRequest(BaseModel):
    """Their request, field for field, with their defaults; other fields are ignored, as their server does."""

    generated_code: str
    timeout: int | float = Field(description="seconds; their timeout message repeats it as sent (1, 10.0)")
    language: str = "ipython"
    std_input: str | None = ""
    max_output_characters: int = Field(1000, ge=0)
    traceback_verbosity: str = "Plain"

    @field_validator("timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer past a float's range (10**400 is JSON): a 500 otherwise
            finite = False
        if isinstance(value, bool) or not finite or value <= 0:
            raise ValueError("timeout must be a positive number of seconds, within a float's range")
        return value


def _answer(status: str, stdout: str, stderr: str, limit: int, created: bool | None = None, code: int = 200,
            headers: dict[str, str] | None = None, whole: bool = True) -> JSONResponse:  # fmt: skip
    """Their answer; ``whole``: False where the output passed the sandbox's cap, which stdout's marker then says."""
    stdout = cut(stdout, limit, whole)
    body: dict[str, Any] = {"process_status": status, "stderr": cut(stderr, limit), "stdout": stdout}
    if created is not None:  # ipython answers say it; the others have exactly the three keys
        body = {"new_session_created": created, **body}
    return JSONResponse(body, code, headers=headers)


def _timed_out(timeout: float, limit: float) -> str:
    # Their words, with their number as the client sent it; codegym's maximum where it lowered it.
    return f"Execution timed out after {timeout if timeout <= limit else limit} seconds\n"


def _busy(exc: Saturated, req: ExecuteRequest, created: bool | None) -> JSONResponse:
    # Their shape, so that their callers (which index process_status, stdout, stderr) read it; the HTTP status
    # and Retry-After say "come back later" to anyone who reads them.
    code = 429 if isinstance(exc, TooManySessions) else 503
    headers = {"Retry-After": str(exc.retry_after_s)}
    return _answer("error", "", f"sandbox busy: {exc}\n", req.max_output_characters, created, code, headers)


class _Ids:
    """What the router keeps of its clients' ids beyond their sessions.

    ``turns``: one call at a time per id. Their server runs an id's cells in turn; codegym's sessions would
    answer a second 409, which their client cannot read. A lock is dropped when nobody holds or waits for it.

    ``restarted``: ids whose interpreter ended under a call. Their server has a fresh shell under such an id
    at once, so the DELETE their client sends before it replays answers 200; here the next call makes the
    session, and until then a DELETE of the id answers 200 too.
    """

    def __init__(self) -> None:
        self.locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self.restarted: OrderedDict[str, None] = OrderedDict()

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        lock, users = self.locks.get(key, (asyncio.Lock(), 0))
        self.locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self.locks[key]
            if users == 1:
                del self.locks[key]
            else:
                self.locks[key] = (lock, users - 1)

    def restart(self, key: str) -> None:
        self.restarted[key] = None
        while len(self.restarted) > _RESTARTED_KEPT:
            self.restarted.popitem(last=False)


def _key(client: str, sid: str) -> str:
    """The store's id of a client's session ``sid``: an id is its client's own, so another client sending the same
    id gets a session of its own and never reaches this one.

    The client's address is quoted, so the first ``/`` ends it: no (client, id) pair makes another's key. And a
    key with a ``/`` in it is no path segment, so no ``/v1/sessions/{id}`` route can name it either.
    """
    return f"{_PREFIX}{quote(client, safe='')}/{sid}"


def _ids(request: Request) -> _Ids:
    ids: _Ids | None = getattr(request.app.state, "nemo_skills_ids", None)
    if ids is None:
        ids = request.app.state.nemo_skills_ids = _Ids()
    return ids


@router.post("/execute")
async def execute(
    req: ExecuteRequest, request: Request, x_session_id: Annotated[str | None, Header()] = None
) -> JSONResponse:
    """Run code as NeMo-Skills' sandbox does: HTTP 200 with ``process_status`` ``completed``, ``error`` or
    ``timeout``; 400 for ipython without ``X-Session-ID`` or with one longer than :data:`MAX_ID_CHARS`; 422 for a
    request without its required fields."""
    if req.language == "ipython":
        if not x_session_id:
            return JSONResponse({"error": _NO_HEADER}, 400)
        if len(x_session_id) > MAX_ID_CHARS:
            return JSONResponse({"error": _LONG_ID}, 400)
        return await _ipython(req, request, x_session_id)
    lang = _STATELESS.get(req.language)
    if lang is None:
        why = f"language {quoted(req.language)} is not served here: ipython, python, python3, pypy3 or shell\n"
        return _answer("error", "", why, req.max_output_characters)
    return await _stateless(req, request.app.state.executor, lang, client_of(request))


async def _ipython(req: ExecuteRequest, request: Request, sid: str) -> JSONResponse:
    # Their client waits ``timeout`` for the answer, then gives up and drops the call: the cell is answered
    # within it, a time-out where it must be, which keeps the session (``sessions/cell_terms.py``).
    answer_by = time.monotonic() + float(req.timeout)
    store: SessionStore = request.app.state.sessions
    limit = req.max_output_characters
    if req.traceback_verbosity not in VERBOSITIES:
        # Their shell dies of it and loses the session; here the cell does not run and the session stays.
        why = f"traceback_verbosity {quoted(req.traceback_verbosity)} is not one of {', '.join(VERBOSITIES)}\n"
        return _answer("error", "", why, limit, False)
    key = _key(client_of(request), sid)
    created = False
    ids = _ids(request)
    async with ids.turn(key):
        ids.restarted.pop(key, None)
        try:
            for _ in range(2):  # a session may end between the look-up and the cell (its TTL): then a new one
                if key not in store.sessions:
                    await store.create(client_of(request), None, None, None, {}, session_id=key)
                    created = True
                try:
                    result = await store.execute(key, req.generated_code, float(req.timeout), None, answer_by)
                    break
                except SessionGone as exc:
                    if exc.ran:  # deleted, or its worker lost, while the cell ran: it ran once, and is not run again
                        why = f"the session {exc.ended or 'ended'} while the cell ran\n"
                        return _answer("error", "", why + _CONNECTION_CLOSED, limit, False)
                    continue
            else:
                raise SessionGone(sid, "ended twice before its cell ran")
        except Saturated as exc:
            return _busy(exc, req, created)
        if not result.alive:
            ids.restart(key)
    max_timeout = store.settings.max_cell_timeout_s
    return _cell_answer(req, result, created or not result.alive, max_timeout)


def _cell_answer(req: ExecuteRequest, result: CellResult, created: bool, max_timeout: float) -> JSONResponse:
    limit, verbosity = req.max_output_characters, req.traceback_verbosity
    if result.status == "time_limit":
        return _answer("timeout", "", _timed_out(req.timeout, max_timeout), limit, created)
    whole = not result.output_truncated
    if not result.alive:  # its interpreter ended (a crash, its memory): their shell's death
        stdout = cell_stdout(result.stdout, None, None, verbosity)
        err = stream(result.stderr + "\n" + _CONNECTION_CLOSED, verbosity)
        return _answer("error", stdout, err, limit, True, whole=whole)
    stdout = cell_stdout(result.stdout, result.display, result.error, verbosity)
    status = "error" if result.error is not None else "completed"
    return _answer(status, stdout, stream(result.stderr, verbosity), limit, created, whole=whole)


async def _stateless(req: ExecuteRequest, executor: Executor, lang: str, client: str) -> JSONResponse:
    limit = req.max_output_characters
    stdin = req.std_input.encode() if req.std_input else None
    limits = executor.run_limits(float(req.timeout), None)
    try:
        ex = await executor.execute(
            lang,
            req.generated_code,
            stdin,
            {},
            limits,
            executor.compile_limits(None),
            RunPolicy(cache=False, client=client),
        )
    except Saturated as exc:
        return _busy(exc, req, None)
    run = ex.run or ex.compile
    assert run is not None  # an execution has a run or the compile that stopped it
    out, err = run.stdout.decode("utf-8", "replace"), run.stderr.decode("utf-8", "replace")
    if run.end is RunEnd.SANDBOX_ERROR:
        return _answer("error", "", (run.error or err) + "\n", limit)
    if run.timed_out:
        return _answer("timeout", "", _timed_out(req.timeout, executor.settings.limits.max_run_timeout_s), limit)
    # Their server: a Python program that ended is completed, whatever its exit code; a shell script is
    # completed when it exits 0.
    failed = lang == "bash" and run.return_code != 0
    return _answer("error" if failed else "completed", out, err, limit, whole=not run.output_exceeded)


@router.get("/sessions")
async def list_sessions(request: Request) -> JSONResponse:
    """Their session list: the ids the caller's clients made (from its address), when each was made and last
    used (Unix time)."""
    store: SessionStore = request.app.state.sessions
    now_wall, now = time.time(), time.monotonic()

    def entry(s: Session) -> dict[str, Any]:
        return {"alive": True, "backend": "ipython", "created": now_wall - (now - s.created),
                "last_used": now_wall - (now - s.used)}  # fmt: skip

    own = _key(client_of(request), "")  # another client's ids are theirs to know
    mine = {k[len(own) :]: entry(s) for k, s in store.sessions.items() if k.startswith(own)}
    return JSONResponse({"backend": "ipython", "sessions": mine})


@router.delete("/sessions/{session_id}")
async def delete_session(session_id: str, request: Request) -> JSONResponse:
    """End the session: its interpreter, processes and files. The next call on the id starts a new one. An id the
    caller holds no session under (another client's among them) is not found."""
    store: SessionStore = request.app.state.sessions
    key, restarted = _key(client_of(request), session_id), _ids(request).restarted
    try:
        await store.delete(key)
    except SessionGone:
        if key not in restarted:
            return JSONResponse({"error": f"IPython session {session_id} not found"}, 404)
    restarted.pop(key, None)
    return JSONResponse({"message": f"IPython session {session_id[:QUOTED]} deleted successfully"})


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """Their readiness probe (the client's ``wait_for_sandbox``): 200 once a worker is up; 503 before."""
    status = request.app.state.executor.backend.status()
    ready = status.get("alive", 0) > 0 and not status.get("warming", False)
    body = {"status": "healthy" if ready else "starting", "worker": os.environ.get("WORKER_NUM", "unknown")}
    return JSONResponse(body, 200 if ready else 503)
