"""What a session's call answers where it cannot be served: the session is gone, busy, or not to be had now."""

from __future__ import annotations

from ..backends.base import Saturated
from ..quoting import quoted


class SessionGone(Exception):
    """The id names no session: never made (``ended`` None), or ended (why, in ``ended``); ``ran``: it ended while
    the cell of the call that says so ran (that cell was sent, and must not be sent again elsewhere)."""

    def __init__(self, session_id: str, ended: str | None, ran: bool = False) -> None:
        self.session_id = session_id
        self.ended = ended
        self.ran = ran
        super().__init__(f"session {quoted(session_id)} {ended}" if ended else f"no session {quoted(session_id)}")


class FilesTooLarge(ValueError):
    """A session's files pass the memory limit that holds them: it could never start (422)."""


class Busy(Exception):
    """A cell of the session is running: its cells run one at a time."""

    @classmethod
    def running(cls, session_id: str, why: str) -> Busy:
        return cls(f"session {quoted(session_id)} is running a cell: {why}")  # its id from a client's path


class SessionNotStarted(Saturated):
    """The sandbox could not start a session's kernel (a worker that did not start): try again."""

    def __init__(self, detail: str) -> None:
        super().__init__(retry_after_s=1)
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class TooManySessions(Saturated):
    """A cap on sessions is reached (the server's, or the client's): come back after some end."""

    def __init__(self, detail: str) -> None:
        super().__init__(retry_after_s=5)
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class StartsTooFast(TooManySessions):
    """A client has sessions started faster than it may (``starts.py``): come back once its next start is due."""

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
