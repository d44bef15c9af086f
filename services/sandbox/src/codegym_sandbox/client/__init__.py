"""The sandbox's client: the only code outside the sandbox that speaks its HTTP API.

:class:`SandboxClient` (blocking) and :class:`AsyncSandboxClient` (async) share one implementation
(``_core``), as httpx's two clients do: the same URLs taken in turn, the same :class:`RetryPolicy`, the same
batching of ``/v1/evaluate`` groups into ``/v1/evaluate/batch`` requests, the same wire models back
(``codegym_sandbox.models``), the same exceptions (:mod:`.exceptions`). Both take an injectable
``transport``, so a test runs the real app in-process::

    app = create_app(Settings(backend="local"))
    async with app.router.lifespan_context(app), AsyncSandboxClient(
        "http://sandbox", transport=httpx.ASGITransport(app=app)
    ) as client:
        response = await client.evaluate(EvaluateRequest(language="python", programs=[...], tests=[...]))

A session (``client.session()``, :mod:`.sessions`) is pinned to the server that made it: given several
URLs, its calls never go round; a cell is never sent twice.

The client returns the server's verdicts as they are; it never derives one of its own.
"""

from __future__ import annotations

from ._async import AsyncSandboxClient
from ._core import RetryPolicy
from ._sync import DEFAULT_URL, SandboxClient
from .exceptions import (
    SandboxError,
    SandboxProtocolError,
    SandboxRejected,
    SandboxUnavailable,
    SessionBusy,
    SessionError,
    SessionGone,
    too_large,
)
from .sessions import AsyncSession, Session

__all__ = [
    "DEFAULT_URL",
    "AsyncSandboxClient",
    "AsyncSession",
    "RetryPolicy",
    "SandboxClient",
    "SandboxError",
    "SandboxProtocolError",
    "SandboxRejected",
    "SandboxUnavailable",
    "Session",
    "SessionBusy",
    "SessionError",
    "SessionGone",
    "too_large",
]
