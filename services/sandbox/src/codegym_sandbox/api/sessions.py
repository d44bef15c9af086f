"""The native sessions API: ``/v1/sessions`` (make, list, look at, delete) and a session's cells."""

from __future__ import annotations

import hashlib
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response

from .. import languages
from ..models import MAX_FILES
from ..sessions import forks
from ..sessions.repeats import KEY_PATTERN
from ..sessions.store import Session, SessionStore
from ..sessions.wire import (
    CellResult,
    CreateSession,
    ExecuteCell,
    ForkSession,
    SessionCreated,
    SessionInfo,
    SessionList,
    SessionsForked,
)
from .deps import client_of
from .files import BadFiles, check_names, scratch_name

router = APIRouter(prefix="/v1/sessions")


async def get_store(request: Request) -> SessionStore:
    return request.app.state.sessions  # type: ignore[no-any-return]


StoreDep = Annotated[SessionStore, Depends(get_store)]


def _info(store: SessionStore, s: Session) -> SessionInfo:
    now = time.monotonic()
    return SessionInfo(
        session_id=s.session_id,
        language="python",
        age_s=now - s.created,
        idle_s=0.0 if s.lock.locked() else now - s.used,
        cells=s.cells,
        memory_mb=s.memory_mb,
        expires_at=store.expires_at(s),
        busy=s.lock.locked(),
    )


KeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=KEY_PATTERN,
        description="The client's own key for this create: the create sent again with it (its answer was lost) "
        "gets the same session, not a second one.",
    ),
]


@router.post("", status_code=201, response_model=SessionCreated)
async def create(req: CreateSession, request: Request, store: StoreDep, key: KeyHeader = None) -> SessionCreated:
    """Make a session: a Python interpreter, kept between calls until it is deleted or its lease ends."""
    if len(req.files) > MAX_FILES:  # before any name is looked at
        raise BadFiles(f"{len(req.files)} files: at most {MAX_FILES}")
    files = {scratch_name(name): text.encode() for name, text in req.files.items()}  # BadFiles: 422
    check_names(files, taken=languages.written_names("python"))
    client = client_of(request)
    limits = req.limits
    asked = hashlib.sha256(req.model_dump_json().encode()).hexdigest()
    session = await store.repeats.create(
        client, key, asked, lambda: store.create(client, req.ttl_s, limits.memory_mb, limits.cell_timeout_s, files)
    )
    return SessionCreated(session_id=session.session_id, expires_at=store.expires_at(session))


@router.get("", response_model=SessionList)
async def list_sessions(request: Request, store: StoreDep) -> SessionList:
    """The caller's sessions (its address's): another client's ids are theirs to know."""
    mine = client_of(request)
    return SessionList(sessions=[_info(store, s) for s in store.sessions.values() if s.client == mine])


@router.get("/{session_id}", response_model=SessionInfo)
async def get(session_id: str, store: StoreDep) -> SessionInfo:
    return _info(store, store.get(session_id))


@router.delete("/{session_id}", status_code=204)
async def delete(session_id: str, store: StoreDep) -> Response:
    await store.delete(session_id)
    return Response(status_code=204)


@router.post("/{session_id}/execute", response_model=CellResult)
async def execute(session_id: str, req: ExecuteCell, store: StoreDep) -> CellResult:
    """Run one cell in the session: what it printed, its last expression's value, its error, its status."""
    return await store.execute(session_id, req.code, req.timeout_s, req.stdin)


@router.post(
    "/{session_id}/fork",
    response_model=SessionsForked,
    responses={
        409: {"description": "A cell runs, or the session runs threads or processes beside its interpreter"},
        429: {"description": "A cap on sessions or their memory is reached"},
        501: {"description": "This server forks no session (see detail)"},
    },
)
async def fork(session_id: str, req: ForkSession, store: StoreDep) -> SessionsForked:
    """Copies of the session as it is between cells, each a session of its own: its memory and files, random
    state included (``reseed``: each its own), isolated from the session and from each other."""
    copies = await forks.fork(store, session_id, req.n, req.reseed)
    return SessionsForked(session_ids=[copy.session_id for copy in copies])
