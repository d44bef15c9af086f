"""Session handles: a stateful interpreter on one sandbox server, held by the client that made it.

``client.session(...)`` makes a session (``POST /v1/sessions``) on the next of the client's URLs, retried
like any request (a 429 of a full server, a server that cannot be reached: to the next URL). From then on
the handle is pinned: every call of the session goes to the URL that made it, retries too, because that
server alone holds its interpreter (another answers 404); so do its copies (``fork``), which live beside it.
Its calls are retried only where that cannot do anything twice: ``info`` and ``delete`` on any failure the
retry policy retries; ``execute`` and ``fork`` only when the request never left the client (the connection
was refused), since a cell run twice is not the cell run once. A session's 404/410 raises ``SessionGone``,
its 409 ``SessionBusy``.

Leaving ``with client.session() as s:`` (``async with`` for :class:`AsyncSandboxClient`) deletes the session;
one already gone (expired, ended by its interpreter) is no error there. ``client.attach(session_id)`` takes
up a session made elsewhere, at the one of the client's URLs that holds it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

from ..sessions.wire import (
    CellResult,
    CreateSession,
    ExecuteCell,
    ForkSession,
    SessionCreated,
    SessionInfo,
    SessionLimits,
    SessionsForked,
)
from . import _core
from ._core import Call, Core, Exchange
from .exceptions import SandboxError, SandboxUnavailable, SessionGone

log = logging.getLogger("codegym.sandbox.client")

Run = Callable[[Exchange], Any]  # a client's driver of one exchange: its answer
AsyncRun = Callable[[Exchange], Awaitable[Any]]


def create_body(
    language: str, ttl_s: float | None, memory_mb: int | None, cell_timeout_s: float | None, files: Mapping[str, str]
) -> dict[str, Any]:
    """The body of ``POST /v1/sessions``, checked by the wire model before it is sent."""
    limits = SessionLimits(memory_mb=memory_mb, cell_timeout_s=cell_timeout_s)
    body = CreateSession.model_validate({"language": language, "ttl_s": ttl_s, "limits": limits, "files": files})
    return _core.wire(body)


def opening(core: Core, body: dict[str, Any]) -> Exchange:
    """Make a session on the next URL (retried over the URLs); the URL that made it and its answer. The create
    carries a key of its own: sent again where its answer was lost, it gets the session its server made."""
    call = Call(key=str(uuid.uuid4()))
    url, data = yield from core.exchange_at("POST", "/v1/sessions", body, call=call)
    return url, _core.parse(SessionCreated, data, "/v1/sessions")


def finding(core: Core, session_id: str, url: str | None) -> Exchange:
    """The URL of the server that holds ``session_id``: ``url`` where given, the client's one URL, else the
    one of its URLs that knows the session (asked in turn). Raises ``SessionGone`` where none holds it (410
    from the server where it ended), ``SandboxUnavailable`` where none does but some could not be asked."""
    if url is not None or len(core.urls) == 1:
        return (url or core.urls[0]).rstrip("/")
    missing: SandboxError | None = None
    for at in core.urls:
        try:
            yield from _Calls(core, at, session_id).info()
            return at
        except SessionGone as exc:
            if exc.status == 410:
                raise  # it was there, and ended
            missing = missing or exc
        except SandboxUnavailable as exc:
            missing = exc
    assert missing is not None
    raise missing


class _Calls:
    """The exchanges of one session's calls, all to its URL: what both handles send."""

    def __init__(self, core: Core, url: str, session_id: str) -> None:
        self.core, self.url, self.session_id = core, url, session_id
        self.path = f"/v1/sessions/{quote(session_id, safe='')}"

    def _call(self, method: str, tail: str, body: Any, *, resend: bool) -> Exchange:
        call = Call(resend=resend, session_id=self.session_id)
        _, data = yield from self.core.exchange_at(method, self.path + tail, body, url=self.url, call=call)
        return data

    def execute(self, code: str, timeout_s: float | None, stdin: str | None) -> Exchange:
        body = _core.wire(ExecuteCell(code=code, timeout_s=timeout_s, stdin=stdin))
        data = yield from self._call("POST", "/execute", body, resend=False)
        return _core.parse(CellResult, data, self.path + "/execute")

    def info(self) -> Exchange:
        data = yield from self._call("GET", "", None, resend=True)
        return _core.parse(SessionInfo, data, self.path)

    def fork(self, n: int, reseed: bool) -> Exchange:
        # Never sent twice: a fork done twice is twice the copies.
        data = yield from self._call("POST", "/fork", _core.wire(ForkSession(n=n, reseed=reseed)), resend=False)
        return _core.parse(SessionsForked, data, self.path + "/fork").session_ids

    def delete(self) -> Exchange:
        # Sent again after a lost answer, a delete that was done answers 410: close() takes that as done.
        yield from self._call("DELETE", "", None, resend=True)


class Session:
    """A session on one server (see the module's docstring); made by :meth:`SandboxClient.session`."""

    def __init__(self, run: Run, core: Core, url: str, session_id: str, expires_at: float | None = None) -> None:
        self._run, self._calls = run, _Calls(core, url, session_id)
        self.session_id, self.url, self.expires_at = session_id, url, expires_at
        self.closed = False

    def __repr__(self) -> str:
        return f"Session({self.session_id!r} at {self.url})"

    def execute(self, code: str, timeout_s: float | None = None, stdin: str | None = None) -> CellResult:
        """Run one cell: what it printed, its last expression's value, its error, its status."""
        result: CellResult = self._run(self._calls.execute(code, timeout_s, stdin))
        return result

    def info(self) -> SessionInfo:
        """The server's view of the session: age, idle time, cells run, memory, expiry, busy."""
        info: SessionInfo = self._run(self._calls.info())
        return info

    def fork(self, n: int = 1, reseed: bool = False) -> list[Session]:
        """``n`` copies of the session as it is now (memory, files, random state; ``reseed``: each its own),
        each a session of its own on the same server, isolated from this one and from each other. A 409
        (``SessionBusy``) says why it cannot be forked now (a cell runs; threads or processes beside the
        interpreter); a server that forks no session answers 501 (``SandboxError``)."""
        ids: list[str] = self._run(self._calls.fork(n, reseed))
        return [Session(self._run, self._calls.core, self.url, sid) for sid in ids]

    def delete(self) -> None:
        """End the session now; raises ``SessionGone`` if it was gone already."""
        self._run(self._calls.delete())
        self.closed = True

    def close(self) -> None:
        """End the session now, if it is still there."""
        if not self.closed:
            try:
                self.delete()
            except SessionGone:
                self.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.close()
        except SandboxError as error:
            if exc is None:
                raise
            # the block's own exception matters more; the session's lease ends it soon anyway
            log.warning("could not delete %r: %s", self, error)


class AsyncSession:
    """A session on one server (see the module's docstring); made by :meth:`AsyncSandboxClient.session`."""

    def __init__(self, run: AsyncRun, core: Core, url: str, session_id: str, expires_at: float | None = None) -> None:
        self._run, self._calls = run, _Calls(core, url, session_id)
        self.session_id, self.url, self.expires_at = session_id, url, expires_at
        self.closed = False

    def __repr__(self) -> str:
        return f"AsyncSession({self.session_id!r} at {self.url})"

    async def execute(self, code: str, timeout_s: float | None = None, stdin: str | None = None) -> CellResult:
        """Run one cell: what it printed, its last expression's value, its error, its status."""
        result: CellResult = await self._run(self._calls.execute(code, timeout_s, stdin))
        return result

    async def info(self) -> SessionInfo:
        """The server's view of the session: age, idle time, cells run, memory, expiry, busy."""
        info: SessionInfo = await self._run(self._calls.info())
        return info

    async def fork(self, n: int = 1, reseed: bool = False) -> list[AsyncSession]:
        """``n`` copies of the session (see :meth:`Session.fork`)."""
        ids: list[str] = await self._run(self._calls.fork(n, reseed))
        return [AsyncSession(self._run, self._calls.core, self.url, sid) for sid in ids]

    async def delete(self) -> None:
        """End the session now; raises ``SessionGone`` if it was gone already."""
        await self._run(self._calls.delete())
        self.closed = True

    async def close(self) -> None:
        """End the session now, if it is still there."""
        if not self.closed:
            try:
                await self.delete()
            except SessionGone:
                self.closed = True

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.close()
        except SandboxError as error:
            if exc is None:
                raise
            log.warning("could not delete %r: %s", self, error)


class AsyncSessionStart:
    """What :meth:`AsyncSandboxClient.session` returns: ``await`` it for the session, or ``async with`` it
    for a session deleted on leaving the block."""

    def __init__(self, run: AsyncRun, core: Core, body: dict[str, Any]) -> None:
        self._run, self._core, self._body = run, core, body
        self._session: AsyncSession | None = None

    async def _open(self) -> AsyncSession:
        url, created = await self._run(opening(self._core, self._body))
        return AsyncSession(self._run, self._core, url, created.session_id, created.expires_at)

    def __await__(self) -> Generator[Any, None, AsyncSession]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncSession:
        self._session = await self._open()
        return self._session

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.__aexit__(kind, exc, tb)
