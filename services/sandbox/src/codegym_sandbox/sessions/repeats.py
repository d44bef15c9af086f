"""Creates sent again: one session for a create and its repeats.

A create whose answer is lost after the server made the session (a proxy's 502 or 504 while a kernel starts, a
connection cut as the answer went) is sent again by its client. Without a way to know it for the same create,
the server would make a second session, and the first would hold its memory and a place under the client's caps
until its idle TTL. So a create may carry an ``Idempotency-Key`` (the client's own, one per create): a create that
comes again with the key of one of its client's sessions gets that session, and one that comes while the first is
still being made waits for it. A key is its client's (another client's same key is another create), and it is
remembered while its session lives: a repeat comes within seconds, and a session gone has nothing to repeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Session = TypeVar("Session")

# What a key may be (the API refuses another with 422): a uuid4 is 36 of these.
KEY_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


class Repeats(Generic[Session]):
    """The keyed creates of a store's sessions: made (while their session lives: ``holds``; ``alive``: how many
    live) and being made."""

    def __init__(self, holds: Callable[[Session], bool], alive: Callable[[], int]) -> None:
        self.holds, self.alive = holds, alive
        self._made: dict[tuple[str, str], Session] = {}
        self._making: dict[tuple[str, str], asyncio.Future[Session]] = {}
        self._asked: dict[tuple[str, str], str] = {}  # each key's create, as its body's digest

    async def create(self, client: str, key: str | None, asked: str, make: Callable[[], Awaitable[Session]]) -> Session:
        """``make()``'s session, or, for a key of ``client``'s seen before, the session it made (waited for
        while it is made). ``asked``: the create's body, as a digest: a key sent again with another body is
        refused (:class:`KeyReused`), never answered with a session made for another create."""
        if key is None:
            return await make()
        at = (client, key)
        while True:
            if (made := self._made.get(at)) is not None and not self.holds(made):
                del self._made[at], self._asked[at]  # ended: a create with its key is a new one
                made = None
            making = self._making.get(at)
            if (made or making) is not None and self._asked.get(at) != asked:
                raise KeyReused("this Idempotency-Key was sent with another create: a key names one create")
            if made is not None:
                return made
            if making is None:
                break
            # Shielded: a repeat that goes away leaves the first to finish. One cut short (its client went
            # away, which ends its create) leaves the repeat to make its own.
            await asyncio.wait({making})
            if not making.cancelled():
                return making.result()  # raises the first's error: the repeat's answer too
        future: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        self._making[at], self._asked[at] = future, asked
        try:
            session = await make()
        except BaseException as exc:
            del self._asked[at]
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # seen: a create without a repeat leaves no "never retrieved" warning
            raise
        finally:
            del self._making[at]
        future.set_result(session)
        self._prune()
        self._made[at] = session
        return session

    def _prune(self) -> None:
        """Forget the keys of sessions gone, once they may outnumber the sessions held: the keys remembered are
        at most about twice the sessions alive."""
        if len(self._made) > 2 * self.alive() + 64:
            self._made = {at: s for at, s in self._made.items() if self.holds(s)}
            self._asked = {at: self._asked[at] for at in (*self._made, *self._making)}


class KeyReused(ValueError):
    """An ``Idempotency-Key`` sent again with another create's body (422)."""
