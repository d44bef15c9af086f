"""The memory budget: what the runs in flight hold stays within what the machine has.

Each run may hold up to its memory limit; a pool of many workers (lent ones included) could otherwise start
more runs than the machine holds, and the kernel's OOM killer would pick among them (or the server). A run
takes a share of the budget before it may take a worker and gives it back when it ends; a run that finds
the budget spent waits for it in the queue, first come first served, as it waits for a worker.

Most runs hold a small part of their limit (the default is 1 GiB; a program that sleeps, or reads its input
and answers, holds a few MiB), so where the pool can read what a worker's runs hold (the kernel's count of
the worker's memory cgroup, see ``memory_use.py``) a run is admitted by a small share (``RUN_FLOOR_MB``) and
charged what it holds, as read on the pool's memory tick; where it cannot, by its whole limit. Runs admitted
by their share may together be allowed more than the budget: once what they hold passes it, those of them that
grew past their share stand paused (:meth:`MemoryBudget.over`; ``agent/run_pause.py``): they hold what they
held (but for a call in flight as they stopped, which still completes: read on every tick), and their time
stands still. They go on, oldest first, as what the others hold leaves room for
each grown to its limit, admitted by that limit from then on, or until the next test of its exchange
(:meth:`MemoryBudget.resumable`, :meth:`MemoryBudget.anew`); and no run is
admitted while one stands paused. Where no run goes on at all, the oldest paused one goes on whatever room there
is: only runs whose limit is within half of what the machine has beyond the budget (:attr:`overcommit_mb`) are
admitted by a share, so that one run's growth is always within the machine's margin. And one paused for
``MEMORY_PAUSE_SHARE`` of its time limit goes on where it fits within the budget and that margin: the kernel's
timers run while a run stands paused, and a program that waits for a time gains what its pause is credited.

A run is never killed and run again for what its neighbours hold: a program that grows only on a bad draw of its
own would then have that draw drawn again, a reward it did not earn. Nor is it judged for it: its pause is
credited. A run still meets its own limit on its own (MLE), in its worker's cgroup.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from typing import NamedTuple

from ..agent.memory_cgroup import MemoryCgroup
from ..agent.protocol import Limits
from ..agent.scratch_cost import files_cost
from .base import RunRequest, Saturated, TooLarge
from .client_turns import TurnOrder

# The longest a run stands paused for the memory budget, as a share of its time limit: then it goes on within the
# margin the budget keeps (:attr:`MemoryBudget.overcommit_mb`). A pause is no time its program's clocks stand still
# (the kernel's timers run), and a program that waits for a time gains what a pause is credited (all of it:
# ``agent/run_pause.py``). Only where that margin is spent too does a run stand paused longer.
MEMORY_PAUSE_SHARE = 0.1
MARGIN_FRACTION = 8  # the budget leaves an eighth of the machine (at least MARGIN_MIN_MB) to all else
MARGIN_MIN_MB = 1024


def machine_memory_mb() -> int:
    """The memory this server may use: the machine's (``MemTotal``), or its cgroup's limit where lower."""
    total = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    limit = _cgroup_limit_mb()
    if limit is not None and (total == 0 or limit < total):
        return limit
    return total or 4096  # no /proc: an assumption, logged by nobody, overridden by the setting


def _cgroup_limit_mb() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), if any."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidate = f"/sys/fs/cgroup{path}/memory.max"
        elif "memory" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"
            if not os.path.exists(candidate):  # the namespace's own root is all that is mounted
                candidate = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
        else:
            continue
        try:
            with open(candidate) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value.isdigit() and int(value) < 1 << 50:  # "max", or v1's "no limit" (near 2**63)
            return int(value) >> 20
    return None


def default_budget_mb() -> int:
    """The budget when none is configured: the machine's memory less a margin for the server, the local backend's
    agents (a few MiB each) and the system. A container's cost beside the limits it serves (its engine's processes,
    its agent and box: tens of MiB) is no part of the margin: it is charged to the budget (``worker_cost.py``)."""
    total = machine_memory_mb()
    return max(total - max(total // MARGIN_FRACTION, MARGIN_MIN_MB), 256)


def run_limit_mb(limits: Limits, unbudgeted_mb: int, held_by_cgroup: bool = False) -> int:
    """What a run may hold, as the memory budget counts it: its address-space limit (of its ``limits``), in MiB.
    A run whose runtime has none (a JVM's or node's heap flag only lets it start) is held by its worker's memory
    cgroup where there is one (``held_by_cgroup``: its memory limit and the supervisors' share, in the kernel:
    ``agent/memory_cgroup.py``); elsewhere only sampled by its box, it is charged ``unbudgeted_mb``."""
    limit = limits.get("address_space_bytes")
    if not limit and held_by_cgroup:
        limit = limits["memory_bytes"] + MemoryCgroup.SUPERVISORS_BYTES
    return -(-int(limit) // (1 << 20)) if limit else unbudgeted_mb


def server_held_mb(request: RunRequest, stdins: list[bytes | None]) -> int:
    """What the server and the agent hold for an exchange of ``request`` on ``stdins``, in MiB: every output it
    may bring back (each run's stdout and stderr up to the output limit: a program's tests go in exchanges
    whose outputs stay within ``EXCHANGE_OUTPUT_BYTES``, see ``judging/schedule.py``), its inputs, its files (as
    the kernel holds them on the run's tmpfs: ``agent/scratch_cost.files_cost``), and the files it fetches back
    (at most ``collect_bytes`` in all, ``agent/scratch_files.collect``)."""
    held = len(stdins) * request.limits.get("output_bytes", 0)
    held += request.limits.get("collect_bytes", 0) if request.collect else 0
    held += sum(len(stdin) for stdin in stdins if stdin) + files_cost({n: d for n, (d, _) in request.files.items()})
    return -(-held // (1 << 20))


class Lease:
    """One run's share of the budget: admitted by ``reserved_mb`` (at most its ``limit_mb``), charged the more
    of that and what it was last seen to hold (``used_mb``), and always ``extra_mb``: what the server itself
    holds for the run (the outputs its exchange may bring back, its inputs)."""

    def __init__(self, limit_mb: int, reserved_mb: int, order: int, extra_mb: int = 0, client: str = "") -> None:
        self.limit_mb, self.reserved_mb, self.order, self.extra_mb = limit_mb, reserved_mb, order, extra_mb
        self.client = client
        self.share_mb = reserved_mb  # what it was admitted by: after a pause, its limit, until its next test
        self.used_mb = 0
        self.paused = False  # its run stands paused: it grows no more, but by a call in flight as it stopped
        self.paused_at = 0.0  # when it was paused
        # How long it may stand paused before it goes on within the margin the budget keeps (MEMORY_PAUSE_SHARE
        # of its time limit, set by the pool).
        self.pause_bound_s = float("inf")

    @property
    def full(self) -> bool:
        """Admitted by its whole limit: it can never hold more than it was admitted by, and never stands paused."""
        return self.reserved_mb >= self.limit_mb

    @property
    def charge_mb(self) -> int:
        return max(self.reserved_mb, self.used_mb) + self.extra_mb


class _Waiting(NamedTuple):
    need_mb: int  # its share and extra: what it needs now
    limit_mb: int
    share_mb: int
    extra_mb: int
    client: str
    granted: asyncio.Future[Lease]


class MemoryBudget:
    """A share of ``total_mb`` among the runs in flight, given to the runs that wait for it client by client, as
    the workers are (``client_turns.TurnOrder``: the client that holds the fewest leases first, then the one served
    longest ago; a client's own runs in the order they came). First come, first served, one client's backlog
    waited ahead of every other client's run, which never reached the workers' turns. A comparison's share is its
    client's too (``judging/off_loop.py``): taken as the server's, one client's outputs waiting for comparison held
    every other client out (round 56). What the server takes for itself (a session's memory, a container's cost)
    is of no client (``""``): never counted in a turn, it is first of those waiting.

    Its sums are kept as leases come, change and go, never summed again: every session holds a lease for its whole
    life, and a server with a thousand idle ones would otherwise add them all up for each run it admits and on
    each of its memory ticks."""

    def __init__(self, total_mb: int) -> None:
        self.total_mb = total_mb  # the server sets the configured budget after the pool is made
        self.machine_mb = machine_memory_mb()
        self._leases: set[Lease] = set()
        self._partial: set[Lease] = set()  # those admitted by a share and going on: the only ones that pause
        self._paused: set[Lease] = set()
        self._held = 0  # what all of them are charged
        self._own = 0  # of it, what the server holds for itself (client ""): sessions for their lives, say
        self._ceiling = 0  # what they could grow to: their limits and extras
        self._order = 0
        # The runs that wait, by client, each client's in the order they came: a release looks at the clients, never
        # at every run that waits (a client's window may hold hundreds).
        self._waiting: dict[str, deque[_Waiting]] = {}
        self._count = 0
        self._turns = TurnOrder()

    @property
    def overcommit_mb(self) -> int:
        """The largest limit a run admitted by a share may have: half of what the machine has beyond the budget
        (the oldest paused run goes on where nothing else does, and may grow to its limit past the budget)."""
        return max(self.machine_mb - self.total_mb, 0) // 2

    @property
    def waiting(self) -> int:
        return self._count

    @property
    def paused(self) -> int:
        return len(self._paused)

    @property
    def held_mb(self) -> int:
        """What the runs in flight are charged: each its share, or what it holds where that is more."""
        return self._held

    @property
    def overcommitted(self) -> bool:
        """Whether the runs in flight, each grown to its limit, would hold more than the budget: what they hold
        must then be watched (:meth:`update`, :meth:`over`)."""
        return self._ceiling > self.total_mb

    def leases(self) -> list[Lease]:
        return list(self._leases)

    def check(self, mb: int, extra_mb: int = 0) -> None:
        """Refuse a run that could never fit (:class:`TooLarge`): waiting would be forever."""
        if mb + extra_mb > self.total_mb:
            raise TooLarge(mb, self.total_mb, extra_mb)

    async def acquire(
        self, mb: int, wait_s: float | None = None, share_mb: int | None = None, extra_mb: int = 0, client: str = ""
    ) -> Lease:
        """Take a share of the budget for a run of limit ``mb``: ``share_mb`` (at most ``mb``; none for a limit
        past :attr:`overcommit_mb`), or all of ``mb``, and ``extra_mb`` the server holds for it; waiting for its
        ``client``'s turn (and for runs that stand paused) at most ``wait_s`` seconds (:class:`Saturated` past it)."""
        self.check(mb, extra_mb)
        share = mb if share_mb is None or mb > self.overcommit_mb else min(share_mb, mb)
        if not self._waiting and not self._paused and self.held_mb + share + extra_mb <= self.total_mb:
            return self._grant(mb, share, extra_mb, client)
        granted: asyncio.Future[Lease] = asyncio.get_running_loop().create_future()
        entry = _Waiting(share + extra_mb, mb, share, extra_mb, client, granted)
        self._waiting.setdefault(client, deque()).append(entry)
        self._count += 1
        self._wake()  # its client's turn may be now, where the run in turn before it did not fit
        try:
            return await asyncio.wait_for(asyncio.shield(granted), wait_s)
        except BaseException as exc:
            if granted.done() and not granted.cancelled():
                self.release(granted.result())  # granted as it was cancelled or timed out: give it back
            else:
                granted.cancel()
                self._take(entry)
                self._turns.forget(client, self._waits(client))
                self._wake()  # another client's run may fit now
            if isinstance(exc, asyncio.TimeoutError):
                raise Saturated(retry_after_s=1, waited_s=wait_s) from None
            raise

    def _grant(self, mb: int, share: int, extra_mb: int, client: str) -> Lease:
        self._order += 1
        lease = Lease(mb, share, self._order, extra_mb, client)
        if client:
            self._turns.granted(client)
        self._leases.add(lease)
        self._held += lease.charge_mb
        self._own += 0 if client else lease.charge_mb
        self._ceiling += lease.limit_mb + lease.extra_mb
        if not lease.full:
            self._partial.add(lease)
        return lease

    def release(self, lease: Lease) -> None:
        if lease in self._leases:
            self._leases.discard(lease)
            self._partial.discard(lease)
            self._paused.discard(lease)
            self._held -= lease.charge_mb
            self._own -= 0 if lease.client else lease.charge_mb
            self._ceiling -= lease.limit_mb + lease.extra_mb
            if lease.client:
                self._turns.gave_back(lease.client, self._waits(lease.client))
        self._wake()

    def update(self, lease: Lease, used_mb: int | None) -> None:
        """What ``lease``'s run holds now (None: it cannot be read, and may hold its whole limit)."""
        before = lease.charge_mb
        lease.used_mb = lease.limit_mb if used_mb is None else used_mb
        if lease in self._leases:
            self._charged(lease, before)
        if lease.charge_mb < before:
            self._wake()

    def over(self, now: float = 0.0) -> list[Lease]:
        """The runs to pause, oldest first: once what the runs hold passes the budget, every run admitted by a
        share that grew past it and goes on (those that grow). Paused, each grows no more but by a call in
        flight as it stopped (a populating ``mmap``), which the tick still reads."""
        if self._held <= self.total_mb:
            return []
        chosen = sorted((lease for lease in self._partial if lease.used_mb > lease.reserved_mb), key=_age)
        for lease in chosen:
            lease.paused, lease.paused_at = True, now
            self._partial.discard(lease)
            self._paused.add(lease)
        return chosen

    def resumable(self, going: int, now: float = 0.0) -> list[Lease]:
        """The paused runs that go on now, oldest first, each admitted by its whole limit from now on: while
        each fits within the budget grown to its limit; where none of the runs goes on (``going`` is how many
        do), the oldest whatever it holds (its limit is within :attr:`overcommit_mb`); and any that has stood
        paused for its :attr:`Lease.pause_bound_s` by ``now``, where it fits within the budget and
        :attr:`overcommit_mb` beyond it. The others wait."""
        out: list[Lease] = []
        blocked = False  # an older one waits for room: no younger one goes on by room before it
        for lease in sorted(self._paused, key=_age):
            grown = self._held - lease.charge_mb + lease.limit_mb + lease.extra_mb
            waits = blocked or (grown > self.total_mb and (going or out))
            # Paused for its bound, it goes on within the margin the budget keeps (see overcommit_mb).
            due = now - lease.paused_at >= lease.pause_bound_s and grown <= self.total_mb + self.overcommit_mb
            if waits and not due:
                blocked = True
                continue
            self._paused.discard(lease)
            lease.paused = False
            before = lease.charge_mb
            lease.reserved_mb = lease.limit_mb
            self._charged(lease, before)
            out.append(lease)
        if out:
            self._wake()
        return out

    def anew(self, lease: Lease) -> None:
        """The next test of ``lease``'s exchange starts, the one before ended with its processes: a lease that went
        on after a pause at its whole limit is admitted by its share again, and charged what the next test is
        read to hold (it pauses as any other if it grows while the runs pass the budget). Else one exchange of
        many tests, one of which stood paused, would hold the budget for its tests times its limit (round 53)."""
        if lease not in self._leases or lease.paused or lease.reserved_mb <= lease.share_mb:
            return
        before = lease.charge_mb
        lease.reserved_mb, lease.used_mb = lease.share_mb, 0
        self._partial.add(lease)
        self._charged(lease, before)
        self._wake()

    def _charged(self, lease: Lease, before: int) -> None:
        """``lease``, charged ``before`` until now, is charged what it is now."""
        self._held += lease.charge_mb - before
        self._own += 0 if lease.client else lease.charge_mb - before

    def _waits(self, client: str) -> bool:
        return client in self._waiting

    def _take(self, entry: _Waiting) -> None:
        queue = self._waiting[entry.client]
        queue.remove(entry)
        if not queue:
            del self._waiting[entry.client]
        self._count -= 1

    def _wake(self) -> None:
        """Grant what fits, in turn: the oldest run of the client next in turn, while it fits. A larger run is not
        passed over for smaller ones, which could keep it waiting for ever, where it fits once the runs in flight
        end; one that cannot fit beside what the server holds for itself (sessions, for their lives) is, until
        that is given back: else a run of the largest limit beside idle sessions held every other client's runs
        for as long as those lived, the budget half free (round 56)."""
        while not self._paused and self._waiting:
            for client in self._turns.ordered(self._waiting):
                # A client's own runs in the order they came, but for those that cannot fit beside what the server
                # holds: passed over within the client too, or one of them held its client's every later run as
                # long as the sessions lived (round 57).
                entry = next((e for e in self._waiting[client] if self._own + e.need_mb <= self.total_mb), None)
                if entry is None:
                    continue
                if self.held_mb + entry.need_mb <= self.total_mb:
                    self._take(entry)
                    entry.granted.set_result(self._grant(entry.limit_mb, entry.share_mb, entry.extra_mb, client))
                    break
                return  # it fits once runs end: none passes it meanwhile
            else:
                return


def _age(lease: Lease) -> int:
    return lease.order
