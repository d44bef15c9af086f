"""What the sandbox client raises, as one tree::

    SandboxError               the client could not get an answer; every one carries ``url``, ``path``, ``status``
    ├── SandboxUnavailable     every attempt failed: unreachable, timed out, or a status the retry policy
    │                          retries (429/503 with ``Retry-After``, 5xx) until the retries ran out
    ├── SandboxRejected        the server refused the request with a status that is not retried (401, 404,
    │                          413, 422): sending it again cannot help
    │   └── SessionError       a session's call refused: its ``session_id``, the server's ``detail``
    │       ├── SessionGone    no such session on its server (404: never made there) or it ended (410:
    │       │                  deleted, expired, its interpreter gone; ``detail`` says which)
    │       └── SessionBusy    another cell of the session is running (409)
    └── SandboxProtocolError   the server answered 200 with a body that is not the API's (another server)

A session's cell is never sent twice: a failure after its request may have reached the server raises
``SandboxUnavailable`` at once (its ``status`` None: the connection broke; or the status the server gave).

A refusal for size (:func:`too_large`: 413, 422) is the one a smaller request may get past: the client sends a
refused batch's groups one by one, and the evaluator splits a refused group down to single programs.

A program's failure is never an exception: it is a verdict in the answer (``SE`` included, when the sandbox
answered that it could not judge).
"""

from __future__ import annotations


class SandboxError(Exception):
    """The client could not get an answer from the sandbox; the message says why, ``status`` the HTTP status."""

    def __init__(self, message: str, *, url: str = "", path: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.path = path
        self.status = status


class SandboxUnavailable(SandboxError):
    """Every attempt failed (unreachable, timed out, or a retried status); the message is the last attempt's."""


class SandboxRejected(SandboxError):
    """The server refused the request with a status that retrying cannot change."""


class SandboxProtocolError(SandboxError):
    """The server answered, but not with the API's body."""


class SessionError(SandboxRejected):
    """A session's call was refused: ``session_id`` the session, ``detail`` the server's reason."""

    def __init__(
        self, message: str, *, url: str = "", path: str = "", status: int | None = None, session_id: str, detail: str
    ) -> None:
        super().__init__(message, url=url, path=path, status=status)
        self.session_id = session_id
        self.detail = detail


class SessionGone(SessionError):
    """The session is not on its server: never made there (404), or ended (410; ``detail`` says how). ``ran``:
    it ended while the call's own cell ran (the cell was run, its answer lost): not to be run again as new."""

    def __init__(
        self,
        message: str,
        *,
        url: str = "",
        path: str = "",
        status: int | None = None,
        session_id: str,
        detail: str,
        ran: bool = False,
    ) -> None:
        super().__init__(message, url=url, path=path, status=status, session_id=session_id, detail=detail)
        self.ran = ran


class SessionBusy(SessionError):
    """Another cell of the session is running: a session runs one cell at a time (409)."""


def too_large(exc: BaseException) -> bool:
    """Whether the server refused a request as it is, one that fewer programs might make acceptable: 413 (its
    body is over the server's limit) or 422 (its runs, or the tests written into each program's input, are over
    the server's limits; or a part of it is not valid). The one reading of such a refusal: a batch refused for it
    goes group by group, a group program by program; what one program refused alone means is the caller's."""
    return isinstance(exc, SandboxRejected) and not isinstance(exc, SessionError) and exc.status in (413, 422)
