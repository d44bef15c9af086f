"""The server's sessions: made, found, used one cell at a time, and ended (by their client or their lease).

A :class:`Session` is a Python kernel in a worker of its own (``backends/session_lease.py``). The store
decides everything about sessions that is not a cell's result: their ids, who may hold how many, their
leases (an idle TTL and a maximum lifetime, enforced by one reaper task), and that one cell of a session
runs at a time (a second answers :class:`Busy`). An ended session is remembered for a while, so that a client
learns why it is gone (deleted, expired, ended by its kernel) rather than that it never existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..agent.cell_frames import read_record
from ..agent.scratch_cost import over_memory
from ..agent.session_main import SESSION_MAIN
from ..backends.base import Backend, SandboxFault, SessionLease
from ..config import SESSION_MIN_MEMORY_MB, Sessions
from ..executor import Executor, RunLimits
from . import room
from .cell_terms import CellTerms
from .errors import Busy, FilesTooLarge, SessionGone, SessionNotStarted, TooManySessions
from .outcome import cell_result
from .repeats import Repeats
from .starts import StartRate
from .wire import CellResult

T = TypeVar("T")

log = logging.getLogger("codegym.sandbox.sessions")
_ENDED_KEPT = 4096  # ended sessions remembered (why each ended), newest first
_REAP_EVERY_S = 1.0
_END_WAIT_S = 10.0  # the longest a server's stop waits for deleted sessions' ends


@dataclass
class Session:
    session_id: str
    client: str
    lease: SessionLease
    memory_mb: int
    cell_timeout_s: float
    idle_ttl_s: float
    created: float = field(default_factory=time.monotonic)
    used: float = field(default_factory=time.monotonic)
    cells: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    held_mb: int = 0  # its worker's cost (worker_cost.py) and the kernels its forks stopped (kernel_copy.py)
    held_slots: int = 0  # sessions' slots (host users) of its family's members gone, held while it lives

    @property
    def holds_mb(self) -> int:
        return self.memory_mb + self.held_mb

    @property
    def holds_slots(self) -> int:
        """What it counts for against the caps on sessions: its own slot, and those its family holds for it."""
        return 1 + self.held_slots

    def expires_in(self, lifetime_s: float, now: float) -> float:
        return min(self.used + self.idle_ttl_s, self.created + lifetime_s) - now


class SessionStore:
    def __init__(self, backend: Backend, executor: Executor, settings: Sessions, server_id: str = "") -> None:
        self.backend = backend
        # Every id starts with its server's: behind one address, a router can send a session's calls to the
        # replica that holds it (see services/sandbox/README.md, "Sessions behind one address").
        self.prefix = f"{server_id}-" if server_id else ""
        self.executor, self.settings = executor, settings
        self.starts = StartRate.of(settings, containers=backend.name != "local")
        self.sessions: dict[str, Session] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()
        self.opening = self.warming = 0  # sessions (and kernels ahead) being started: counted against the caps
        # and per client: a kernel starts over seconds, and creates that come together would otherwise all
        # pass the client's cap before any of them is held
        self.opening_by: dict[str, int] = {}
        self.opening_mb_by: dict[str, int] = {}  # the memory of those, by client
        self.opening_mb = 0  # and the memory of those not taken from kernels started ahead
        self.warm: list[SessionLease] = []  # kernels started ahead, with the default limits (SESSIONS__WARM)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ending: set[asyncio.Task[None]] = set()  # deleted sessions' ends
        self._stopping = False
        self._reaper: asyncio.Task[None] | None = None
        # Creates sent again (an Idempotency-Key): one session for them all.
        self.repeats = Repeats(self.holds, lambda: len(self.sessions))
        self.metrics = executor.metrics
        self.metrics.track_sessions(
            lambda: len(self.sessions), lambda: sum(x.holds_mb for x in self.sessions.values()), lambda: len(self.warm)
        )

    # -- life ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap())

    async def stop(self) -> None:
        self._stopping = True
        if self._ending:  # deleted sessions' ends are seen through: cut short, one could leave its worker behind
            await asyncio.wait(set(self._ending), timeout=_END_WAIT_S)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(lease.close() for lease in self.warm), return_exceptions=True)
        self.warm.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        ending = [self.end(s, "ended: the server stopped", "stopped") for s in list(self.sessions.values())]
        await asyncio.gather(*ending)

    async def create(self, client: str, ttl_s: float | None, memory_mb: int | None, cell_timeout_s: float | None,
                     files: dict[str, bytes], session_id: str | None = None) -> Session:  # fmt: skip
        """A new session; ``session_id`` where the caller names it (an API whose clients make their ids): none now."""
        s = self.settings
        if session_id is not None and session_id in self.sessions:
            raise ValueError(f"session {session_id[:64]!r} exists")  # a caller's id, cut as ``quoting`` cuts
        if self._held() + self.opening >= s.max_sessions:
            raise TooManySessions(f"this server holds {s.max_sessions} sessions, its most (SESSIONS__MAX_SESSIONS)")
        held = self._held(client) + self.opening_by.get(client, 0)
        if held >= s.max_sessions_per_client:
            raise TooManySessions(f"{client} holds {held} sessions, the most one client may")
        # Whatever a caller asks for (the wire refuses what is not positive), within the server's bounds.
        memory = max(min(memory_mb or s.memory_mb, s.max_memory_mb), SESSION_MIN_MEMORY_MB)
        if why := over_memory(files, memory, "the session's"):  # the agent writes them, outside its memory
            raise FilesTooLarge(why)
        from_warm = memory == s.memory_mb and bool(self.warm)
        cost = memory + self.backend.worker_cost_mb  # what it takes of the budget: its worker's cost too
        self._check_share(0 if from_warm else cost)  # a kernel started ahead is counted already
        self._check_client_share(client, cost)
        self.starts.take(client)  # the last check: a create refused by a cap starts nothing
        self.opening += 1
        self.opening_by[client] = self.opening_by.get(client, 0) + 1
        self.opening_mb_by[client] = self.opening_mb_by.get(client, 0) + cost
        self.opening_mb += 0 if from_warm else cost
        try:
            # A kernel started ahead, where one of this memory waits: nothing ran in it yet.
            try:
                lease = self.warm.pop() if memory == s.memory_mb and self.warm else await self._opened(memory)
            except SandboxFault as exc:
                raise SessionNotStarted(f"no session could start: {exc}") from None
            try:
                if files:
                    await lease.put_files({name: (data, 0o644) for name, data in files.items()})
            except BaseException as exc:
                await lease.close()
                if isinstance(exc, SandboxFault):
                    raise SessionNotStarted(f"the session's files could not be written: {exc}") from None
                raise
        finally:
            self.opening -= 1
            self._opened_by(client, cost)
            self.opening_mb -= 0 if from_warm else cost
            self._refill()
        session = Session(
            session_id=session_id or self.prefix + secrets.token_urlsafe(16),
            client=client,
            lease=lease,
            memory_mb=memory,
            held_mb=self.backend.worker_cost_mb,
            cell_timeout_s=min(cell_timeout_s or s.cell_timeout_s, s.max_cell_timeout_s),
            idle_ttl_s=min(ttl_s or s.idle_ttl_s, s.max_idle_ttl_s),
        )
        self.sessions[session.session_id] = session
        self.metrics.sessions_created.inc()
        return session

    @contextlib.contextmanager
    def reserving(self, client: str, sessions: int, memory_mb: int) -> Iterator[None]:
        """``sessions`` more of ``client``'s, holding ``memory_mb``, refused past a cap (:meth:`check_caps`) and
        counted against the caps while they are made (a fork's copies): two forks at once each see the other's."""
        self.check_caps(client, sessions, memory_mb)
        self.opening += sessions
        self.opening_by[client] = self.opening_by.get(client, 0) + sessions
        self.opening_mb_by[client] = self.opening_mb_by.get(client, 0) + memory_mb
        self.opening_mb += memory_mb
        try:
            yield
        finally:
            self.opening -= sessions
            self.opening_mb -= memory_mb
            self._opened_by(client, memory_mb, sessions)

    def _opened_by(self, client: str, memory_mb: int, sessions: int = 1) -> None:
        # A client with nothing being opened leaves no entry: the maps hold the clients of the moment only.
        left_mb = self.opening_mb_by.pop(client) - memory_mb
        if left_mb > 0:
            self.opening_mb_by[client] = left_mb
        left = self.opening_by.pop(client) - sessions
        if left:
            self.opening_by[client] = left

    def _check_share(self, memory_mb: int) -> None:
        """Sessions hold their memory (and their containers' cost) for their whole life, idle or not: together
        (those started ahead too) they may hold ``SESSIONS__MEMORY_SHARE`` of the memory budget at most."""
        budget = self.backend.memory.total_mb
        ahead = (self.settings.memory_mb + self.backend.worker_cost_mb) * (len(self.warm) + self.warming)
        held = sum(x.holds_mb for x in self.sessions.values()) + ahead + self.opening_mb
        most = int(budget * self.settings.memory_share)
        if held + memory_mb > most:
            raise TooManySessions(
                f"the sessions hold {held} MiB of memory and this one asks for {memory_mb}: sessions may hold "
                f"{most} MiB, {self.settings.memory_share:g} of the memory budget (SESSIONS__MEMORY_SHARE)"
            )

    def _check_client_share(self, client: str, memory_mb: int) -> None:
        """One client's sessions (those being opened too) hold ``SESSIONS__CLIENT_MEMORY_SHARE`` of what sessions
        may hold together, at most."""
        held = sum(x.holds_mb for x in self.sessions.values() if x.client == client)
        held += self.opening_mb_by.get(client, 0)
        most = int(self.backend.memory.total_mb * self.settings.memory_share * self.settings.client_memory_share)
        if held + memory_mb > most:
            raise TooManySessions(
                f"{client}'s sessions hold {held} MiB of memory and this one asks for {memory_mb}: one client's may "
                f"hold {most} MiB (SESSIONS__CLIENT_MEMORY_SHARE)"
            )

    def _held(self, client: str | None = None) -> int:
        """The sessions' slots held (``client``'s, or all): a family holds its worker's for members gone."""
        return sum(x.holds_slots for x in self.sessions.values() if client is None or x.client == client)

    def check_caps(self, client: str, sessions: int, memory_mb: int) -> None:
        """Refuse (:class:`TooManySessions`) ``sessions`` more of ``client``'s, holding ``memory_mb``, past a cap."""
        s = self.settings
        if self._held() + self.opening + sessions > s.max_sessions:
            raise TooManySessions(f"this server holds {s.max_sessions} sessions, its most (SESSIONS__MAX_SESSIONS)")
        held = self._held(client) + self.opening_by.get(client, 0)
        if held + sessions > s.max_sessions_per_client:
            raise TooManySessions(f"{client} holds {held} sessions, the most one client may")
        self._check_share(memory_mb)
        self._check_client_share(client, memory_mb)

    async def _opened(self, memory_mb: int) -> SessionLease:
        """:meth:`_open`, carried to its end even when its caller goes away (a worker's start is not to be cut
        in the middle): a lease no caller takes is closed."""
        task = asyncio.create_task(self._open(memory_mb))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._close_unwanted)
            raise

    def _close_unwanted(self, task: asyncio.Task[SessionLease]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.spawn(task.result().close())

    async def _open(self, memory_mb: int) -> SessionLease:
        """A fresh kernel with the session's limits: the memory of everything it holds, its CPU time over its
        life, its processes; its wall clock is the agent's business, cell by cell."""
        s = self.settings
        lang = self.executor.language("python")
        limits = RunLimits(s.max_lifetime_s + s.max_cell_timeout_s, memory_mb)
        sources = {lang.source: (SESSION_MAIN.encode(), 0o644)}
        request = self.executor.request(lang, lang.run, sources, None, limits, [], compile_step=False)
        request.limits["cpu_s"] = s.cpu_s
        request.limits["processes"] = s.processes
        return await self.with_room(lambda: self.backend.open_session(request, memory_mb))

    async def with_room(self, make: Callable[[], Awaitable[T]]) -> T:
        """``make()``, given room as ends on their way give it back (``room.with_room``)."""
        return await room.with_room(make, self._ending)

    def _refill(self) -> None:
        """Start kernels ahead (``SESSIONS__WARM``, within the caps), so that making a session takes one. Only
        once a session was made: a server whose clients make none starts none."""
        s = self.settings
        while (
            not self._stopping
            and len(self.warm) + self.warming < s.warm
            and len(self.sessions) + len(self.warm) + self.warming + self.opening < s.max_sessions
        ):
            self.warming += 1
            self.spawn(self._warm_one())

    async def _warm_one(self) -> None:
        try:
            self._check_share(0)
            lease = await self._open(self.settings.memory_mb)
        except Exception as exc:  # the budget has no room, a worker did not start: made when asked for
            log.info("no session kernel started ahead: %s", exc)
            return
        finally:
            self.warming -= 1
        if self._stopping:
            await lease.close()
        else:
            self.warm.append(lease)

    def holds(self, session: Session) -> bool:
        """Whether ``session`` is one of the store's now: its id may name a later session (a client's own ids)."""
        return self.sessions.get(session.session_id) is session

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionGone(session_id, self.ended.get(session_id))
        return session

    async def delete(self, session_id: str) -> None:
        # Answered once out of the store: its worker ends behind (a container's removal takes 100 ms), and what it
        # holds (its memory, its slot) is given back as it does, which a session made meanwhile waits for.
        if self._forget(session := self.get(session_id), "was deleted", "deleted"):
            self._ending.add(ending := self.spawn(session.lease.close(busy=session.lock.locked())))
            ending.add_done_callback(self._ending.discard)

    async def execute(self, session_id: str, code: str, timeout_s: float | None, stdin: str | None = None,
                      answer_by: float | None = None) -> CellResult:  # fmt: skip
        """Run one cell. ``answer_by``: when its caller stops waiting for the answer (see ``cell_terms``)."""
        session = self.get(session_id)
        if session.lock.locked():
            raise Busy.running(session_id, "its cells run one at a time")
        async with session.lock:
            if session.expires_in(self.settings.max_lifetime_s, time.monotonic()) <= 0:
                # The reaper passes over a session mid-cell, and one whose cells follow each other is mid-cell
                # whenever it looks: its lifetime ends here, at its next cell.
                await self.end(session, "expired", "expired")
                raise SessionGone(session_id, self.ended.get(session_id))
            terms = CellTerms(min(timeout_s or session.cell_timeout_s, self.settings.max_cell_timeout_s), answer_by)
            cap = self.executor.settings.limits.output_bytes
            session.used = time.monotonic()
            # A slot of the pool first, as a run takes one: cells and runs compute from one queue. A wait there
            # (cancelled, or past its caller's time) is before the cell was sent: it ends nothing.
            slot = self.backend.computing(session.lease, terms.waits_for_it, terms.limit_s, session.client)
            async with terms.held(slot) as wall_s:
                if wall_s <= 0:
                    return terms.unrun()
                try:
                    done, record = await session.lease.cell(terms.message(code, stdin, cap, wall_s), wall_s)
                except BaseException as exc:
                    # Its caller went away (the request was cancelled) or its worker failed: the cell's answer
                    # may still come, and would be read as the next cell's. The session ends: nothing is read
                    # out of turn.
                    gone = not self.holds(session)
                    self._forget(session, "ended: a cell's call was abandoned, or its worker failed", "killed")
                    self.spawn(session.lease.close(busy=True))
                    if gone and isinstance(exc, SandboxFault):  # deleted meanwhile
                        raise SessionGone(session_id, self.ended.get(session_id), ran=True) from None
                    if isinstance(exc, SandboxFault):
                        raise SessionGone(session_id, f"ended: its worker failed ({exc})", ran=True) from None
                    raise
            if not self.holds(session):  # ended while its cell ran (a copy's cell runs to its end)
                raise SessionGone(session_id, self.ended.get(session_id), ran=True)
            session.cells += 1
            session.used = time.monotonic()
            result = cell_result(done, read_record(record, 1), session.memory_mb, cap)
            self.metrics.session_cells.labels(status=result.status).inc()
        if not result.alive:
            cause = "killed" if result.status == "finished" else result.status
            await self.end(session, f"ended: its interpreter ended ({result.status})", cause)
        return result

    def expires_at(self, session: Session) -> float:
        return time.time() + session.expires_in(self.settings.max_lifetime_s, time.monotonic())

    # -- ends ---------------------------------------------------------------------------------------------
    async def end(self, session: Session, why: str, cause: str) -> None:
        if self._forget(session, why, cause):
            await session.lease.close(busy=session.lock.locked())

    def _forget(self, session: Session, why: str, cause: str) -> bool:
        """Take ``session`` out of the store (why it ended kept); False where it was out already."""
        if not self.holds(session):
            return False
        del self.sessions[session.session_id]
        # What its family holds for it stays held while the family lives, counted on a member: its forks' kernels'
        # memory, and the host user of the family's worker, which it held (the family's own, given back last).
        family = getattr(session.lease, "family", None)
        heirs = [x for x in self.sessions.values() if family is not None and getattr(x.lease, "family", 0) is family]
        if family is not None and heirs:
            heirs[0].held_mb += session.held_mb
            keeps = getattr(session.lease, "slot", None) == family.worker.slot
            heirs[0].held_slots += session.held_slots + int(keeps)
        self.metrics.sessions_ended.labels(cause=cause).inc()
        self.ended[session.session_id] = why
        while len(self.ended) > _ENDED_KEPT:
            self.ended.popitem(last=False)
        return True

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` behind the answer (an end, a warm kernel), held until it is done."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(_REAP_EVERY_S)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if not session.lock.locked() and session.expires_in(self.settings.max_lifetime_s, now) <= 0:
                    await self.end(session, "expired", "expired")
