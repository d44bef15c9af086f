"""What the sandbox client raises, as one tree::

    SandboxError               the client could not get an answer; every one carries ``url``, ``path``, ``status``
    ├── SandboxUnavailable     every attempt failed: unreachable, timed out, or a status the retry policy
    │                          retries (429/503 with ``Retry-After``, 5xx) until the retries ran out
    ├── SandboxRejected        the server refused the request with a status that is not retried (401, 404,
    │                          413, 422): sending it again cannot help
    └── SandboxProtocolError   the server answered 200 with a body that is not the API's (another server)

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
