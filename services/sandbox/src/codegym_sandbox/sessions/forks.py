"""A session's fork (``POST /v1/sessions/{id}/fork``): copies of its interpreter, each a session of its own.

A fork copies the session's kernel as it waits between cells (``agent/kernel_copy.py``): the copies' memory
and files are the session's at that moment, random state included (``reseed`` gives each its own), and each
copy is isolated from the session and from the others as two sessions are. The store's caps count the copies
as the sessions they are; the memory budget holds each copy's limit, and the session's once more (what it
held at the fork stays held, its copies sharing it, until the last of them ends).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import TYPE_CHECKING

from ..backends.base import SandboxFault, SessionLease
from ..backends.session_family import ForkRefused
from .errors import Busy, SessionGone
from .store import Session

if TYPE_CHECKING:
    from .store import SessionStore

__all__ = ["ForkNotOffered", "ForkRefused", "TooManyCopies", "fork"]

# The longest a fork's copies may take to be made (a fork of 64 copies of a session holding 10,000 files takes
# seconds). Past it the session ends, as where its agent failed: a fork with no end held a slot of the pool, which
# every session's cells need, and its session's lock, which kept the session from expiring.
FORK_WALL_S = 120.0


class ForkNotOffered(Exception):
    """This server forks no session (its backend's reason)."""


class TooManyCopies(ValueError):
    """A fork asked for more copies than one fork may make."""


async def _taken(made: asyncio.Future[list[SessionLease]]) -> list[SessionLease]:
    """The leases of a fork whose caller went away, once it is done (none where it failed)."""
    try:
        return await asyncio.shield(made)
    except asyncio.CancelledError:
        return await made
    except Exception:
        return []


async def _close_late(made: asyncio.Future[list[SessionLease]]) -> None:
    """The copies of a fork that answered past :data:`FORK_WALL_S`, if it ever does: no session has them."""
    await asyncio.gather(*(lease.close() for lease in await _taken(made)))


async def _adopt(store: SessionStore, session: Session, leases: list[SessionLease]) -> list[SessionLease] | None:
    """Whatever way a fork's call ends, once its copies are made (``leases``; none where they were not): the
    session goes on as the first, and what its kernel held is counted on it as the budget holds it, until its
    family ends (the one ledger of it: ``Session.held_mb``). The copies' leases, or None where the session was
    deleted meanwhile, and its copies, never sessions, end with it."""
    if not leases:
        return []
    if not store.holds(session):
        await asyncio.gather(*(lease.close() for lease in leases))
        return None
    session.lease = leases[0]
    session.held_mb += session.memory_mb
    return leases[1:]


async def fork(store: SessionStore, session_id: str, n: int, reseed: bool) -> list[Session]:
    """``n`` copies of session ``session_id``, made sessions of the store (the session goes on as it was)."""
    s = store.settings
    session = store.get(session_id)
    if (why := store.backend.fork_refusal) is not None:
        raise ForkNotOffered(why)
    if n > s.max_fork:
        raise TooManyCopies(f"a fork makes {s.max_fork} copies at most (SESSIONS__MAX_FORK), not {n}")
    if session.lock.locked():
        raise Busy.running(session_id, "it is forked between cells")
    store.check_caps(session.client, n, (n + 1) * session.memory_mb)
    async with session.lock:
        if session.expires_in(s.max_lifetime_s, time.monotonic()) <= 0:
            await store.end(session, "expired", "expired")
            raise SessionGone(session_id, store.ended.get(session_id))
        # Counted against the caps until they are sessions (a fork of another session meanwhile sees them).
        with store.reserving(session.client, n, (n + 1) * session.memory_mb):
            # A slot of the pool while the copies are made, as a cell takes one: the copying is CPU the session uses.
            async with store.backend.computing(session.lease, pausable=False, client=session.client):
                lease = session.lease
                made = asyncio.ensure_future(
                    store.with_room(lambda: store.backend.fork_session(lease, n, reseed, session.memory_mb, s.cpu_s))
                )
                try:
                    try:
                        leases = await asyncio.wait_for(asyncio.shield(made), FORK_WALL_S)
                    except TimeoutError:
                        store.spawn(_close_late(made))
                        raise SandboxFault(f"its copies were not made in {FORK_WALL_S:.0f} s") from None
                except asyncio.CancelledError:
                    # Its caller went away: the agent makes the copies (or not) all the same, and the session is its
                    # copy now. Taken to its end: the session goes on with it, its copies, never seen, end.
                    if (unseen := await _adopt(store, session, await _taken(made))) is not None:
                        await asyncio.gather(*(lease.close() for lease in unseen))
                    raise
                except SandboxFault as exc:
                    # The agent could not make the copies and may have left the kernel anywhere: the session ends.
                    await store.end(session, f"ended: its fork failed ({exc})", "killed")
                    raise SessionGone(session_id, store.ended.get(session_id), ran=True) from None
            if (copied := await _adopt(store, session, leases)) is None:  # deleted while it was forked
                raise SessionGone(session_id, store.ended.get(session_id), ran=True)
            session.used = time.monotonic()
            copies = [
                Session(
                    session_id=store.prefix + secrets.token_urlsafe(16),
                    client=session.client,
                    lease=lease,
                    memory_mb=session.memory_mb,
                    cell_timeout_s=session.cell_timeout_s,
                    idle_ttl_s=session.idle_ttl_s,
                    created=session.created,  # its lifetime is the state's: a fork does not renew it
                    cells=session.cells,
                )
                for lease in copied
            ]
            for copy in copies:
                store.sessions[copy.session_id] = copy
                store.metrics.sessions_created.inc()
            store.metrics.session_forks.inc()
    return copies
