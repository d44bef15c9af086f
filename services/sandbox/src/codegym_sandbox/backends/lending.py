"""When the pool lends workers beyond its own, and how many: the policy, and what it measures.

Runs that sleep or wait on I/O (as many tests of RL datasets do) would hold every worker while the CPUs sit
idle; the pool then lends more workers, so that they all start at once. Runs that compute must not: more of
them than CPUs only share the CPUs, and a run whose wall time stretches past what the wall-clock credit
covers (its processes' wait for a CPU, up to twice its limit: see ``agent/loop.py``) is TLE for it. Which
kind a waiting run is cannot be known before it runs, so the policy bets a step at a time:

- a run is *measured* once it is seen to compute on one look (it wants what it ran), or to be idle on two
  looks in a row (it sleeps): idle on one look, it may only be waiting for the server (its program not
  started yet, or between two parts of a test series), and its start-up (``MEASURE_AFTER_S``) says nothing;
- it lends only while the measured runs, and every run on the pool's own workers, leave at least
  ``LEND_IDLE_CPUS`` of the CPUs unused;
- in one tick, at most enough runs that, should every run not yet measured compute, there are
  ``LEND_PER_CPU`` runs per CPU: each then waits at most twice its CPU time, which the credit covers for
  any run that keeps within its limit (and for a run that needs half of it, with room for other load). Runs
  lent on earlier ticks and not measured yet count in that bound: so sleepers are lent workers as fast as
  they are measured, while a burst of runs that compute gets one step, then nothing once it is measured;
- a lent worker whose run ends takes the next waiting run only while the CPUs are idle even counting every
  run not measured as computing; otherwise (or with nothing waiting) it is parked: warm, but open to no run
  until a later tick lends it again. So what ran before never leaves open workers for the next burst of runs
  to crowd the CPUs with.

A session's cell holds one of the pool's own slots while it runs on its session's worker, never a lent one
(lent slots are a bet on runs, which stand paused when they compute after all), and the meter measures that
worker in the slot's place (``WorkerPool.computing``): cells that sleep are lent around as runs that sleep are.

A run found asleep is looked at again only every ``REMEASURE_ASLEEP_S``: with a hundred of them, reading
their processes every tick took a third of the server's event loop and slowed the lending it decides.

A run lent a worker because it slept may compute later: sixteen programs that sleep 0.3 s and then compute
are all lent a worker before any computes, and then share two CPUs eight to one, past what the wall-clock
credit covers. So while lent runs are busy the pool measures them on every tick, whether runs wait or not,
and once the runs measured computing want more than ``LEND_PER_CPU`` per CPU, the youngest lent ones among
them that woke and have computed for ``CROWDED_AFTER_S`` since stand paused (:meth:`DemandMeter.crowding`;
``agent/run_pause.py``: their time stands still). They go on, oldest first, as the runs computing leave room
for one more each, counted as computing from then on (they never stand paused twice). A run is never killed
and run again for it: a program that computes only on a bad draw of its own would have that draw drawn again.
The programs that change between sleeping and computing get no more of the CPUs than the machine has; a
sleeper that wakes only to print and exit, even a hundred at once, never stands paused.

Lending a parked worker takes a tick; starting one takes about 50 ms of CPU (its namespaces, its root, its
first box). A hundred sleepers lent on a two-CPU machine while their workers start wait seconds for them:
past SkyRL's margin (run + 2 s), however the starts are paced, since the starts and the sleepers' own
start-up share the same CPUs. So the pool keeps every slot lending may add started ahead and parked
(:func:`reserve`, within a share of the memory budget), starts them before the server says it is ready
(:class:`Warming`), and refills them only while no run waits and no run computes on busy CPUs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Iterable
from typing import NamedTuple, Protocol, TypeVar

LEND_TICK_S = 0.02  # how often the pool measures its runs and decides
LEND_AFTER_S = 0.05  # how long the oldest run waits before lending begins (a worker may be about to come free)
LEND_IDLE_CPUS = 0.5  # the unused CPUs lending needs
LEND_IDLE_TICKS = 2  # on this many ticks in a row, where the runs cannot be measured (the meter looks twice)
LEND_PER_CPU = 3  # runs per CPU, counting each run not measured yet as computing, that lending may add up to
ASLEEP_RATE = 0.05  # a run that wanted less of a CPU than this on two looks in a row sleeps, and ...
REMEASURE_ASLEEP_S = 0.25  # ... is measured again after this long (a hundred sleepers' /proc reads cost a tick)
CROWDED_AFTER_S = 0.5  # a run that woke stands paused only once it has wanted this much of a CPU since (see crowding)
CROWDED_MARGIN = 0.5  # how far past LEND_PER_CPU per CPU the runs measured computing go before some stand paused
MEASURE_AFTER_S = 0.02  # a run younger than this is not measured: its start-up says nothing of it yet
PARKED_WORKER_MB = 12  # what a parked local worker holds: its processes' own pages, its root's (about 9 MiB)
PARKED_SHARE = 16  # parked workers started by default hold at most this part of the memory budget (1/16)
READY_WITHIN_S = 30.0  # start-up waits this long at most for the reserve (the chart's startup probe allows 60 s)
RETIRE_AFTER_S = 300.0  # a parked worker beyond the reserve, unused this long, goes away
QUIET_TICK_S = 1.0  # with no run waiting and no worker starting, the loop ticks this seldom (or when one waits)


class Demand(NamedTuple):
    """What busy runs want: the CPUs of those measured, and how many are not measured yet (each may compute)."""

    measured: float
    unmeasured: int


class Measured(Protocol):
    """A worker as the meter sees it: what its processes have run or waited to run, in seconds."""

    def demand_s(self) -> float | None: ...


M = TypeVar("M", bound=Measured)


def lend_now(cpus: int, known: float, unknown: float, waiting: int, room: int) -> int:
    """How many waiting runs to give lent workers this tick.

    ``known``: the CPUs the runs in progress want, as far as they are measured (see :class:`DemandMeter`);
    ``unknown``: runs lent on earlier ticks and not measured yet, each of which may compute; ``waiting``: runs
    that wait for a worker; ``room``: lent workers there may be beyond those lent now (``max_workers``).
    """
    if waiting <= 0 or room <= 0 or not keep_open(cpus, known):
        return 0
    return max(0, min(waiting, room, math.floor(LEND_PER_CPU * cpus - known - unknown)))


def keep_open(cpus: int, load: float) -> bool:
    """Whether lent workers may take runs (the CPUs are idle enough), or are parked after their run."""
    return cpus - load >= LEND_IDLE_CPUS


def reserve(room: int, wanted: int | None, budget_mb: int) -> int:
    """Parked workers to keep started ahead: ``wanted`` (the server's setting), or by default every slot
    lending may add (``room``) that fits in 1/``PARKED_SHARE`` of the memory budget (``budget_mb``)."""
    fit = budget_mb // PARKED_SHARE // PARKED_WORKER_MB
    return max(0, min(room, fit if wanted is None else wanted))


def retiring(parked: dict[int, float], keep: int, now: float) -> list[int]:
    """The parked slots (slot -> parked since) beyond the ``keep`` of the reserve, unused for RETIRE_AFTER_S."""
    old = sorted((since, slot) for slot, since in parked.items() if now - since >= RETIRE_AFTER_S)
    return [slot for _, slot in old[: max(len(parked) - keep, 0)]]


class Warming:
    """Whether start-up is still starting the reserve: the server is ready only once it has (a burst of
    sleepers sent at once to a server that says it is ready must find their workers started), or once a start
    failed (lending then starts none for a while), or ``READY_WITHIN_S`` after the pool started. Once over,
    it stays over: lending and retiring parked workers never make the server unready."""

    def __init__(self) -> None:
        self.until = 0.0  # set by the pool's start
        self.over = False

    def start(self, now: float) -> None:
        """The pool's own workers are up: the reserve's start begins."""
        self.until, self.over = now + READY_WITHIN_S, False

    def check(self, parked: int, target: int, start_failed: bool, now: float) -> bool:
        self.over = self.over or parked >= target or start_failed or now > self.until
        return not self.over


class DemandMeter:
    """The CPUs that busy workers' runs want: time run plus time waiting to run, per second.

    Waiting counts as much as running: a run that would compute but gets no CPU (the machine is busy with
    other work) wants a CPU as much as one that has it. While the pool may lend, a run is measured from its
    start (:meth:`started`), so that the tick after its start-up already tells whether it computes.
    """

    def __init__(self) -> None:
        self._seen: dict[Measured, tuple[float, float]] = {}  # run -> (when it was last looked at, its demand)
        self._young: dict[Measured, float] = {}  # run -> until when its start-up goes on (it is not looked at)
        self._dozing: set[Measured] = set()  # runs idle on their last look (once is not asleep: see load)
        self._asleep: dict[Measured, float] = {}  # runs measured asleep twice -> when to measure them again
        self._rate: dict[Measured, float] = {}  # run -> the CPUs it wanted on its last look
        # run once found asleep -> its demand when it last woke (inf while it sleeps): what it has wanted since
        self._woke: dict[Measured, float] = {}
        self._computes: set[Measured] = set()  # runs that stood paused for the CPUs once: computing, never read

    def computing(self, worker: Measured) -> None:
        """``worker``'s run stood paused for the CPUs, and goes on: it computes from now on, and is never read."""
        self._computes.add(worker)

    def started(self, worker: Measured, lending: bool) -> None:
        """``worker`` begins a run: its start-up goes on for ``MEASURE_AFTER_S``. While the pool may lend (the
        last tick found the CPUs idle), its demand is read now, so that the first tick after its start-up
        measures it. Otherwise the first look takes the starting point, a tick later: with the CPUs busy and
        runs queued behind them, reading the processes of every run that starts (most end before the next
        tick) costs the server CPU on every request, for lending that the busy CPUs forbid anyway."""
        now = time.monotonic()
        self._young[worker] = now + MEASURE_AFTER_S
        demand = worker.demand_s() if lending else None
        if demand is not None:
            self._seen[worker] = (now, demand)

    def ended(self, worker: Measured) -> None:
        self._seen.pop(worker, None)
        self._young.pop(worker, None)
        self._dozing.discard(worker)
        self._asleep.pop(worker, None)
        self._rate.pop(worker, None)
        self._woke.pop(worker, None)
        self._computes.discard(worker)

    def load(self, busy: Iterable[Measured], now: float) -> Demand | None:
        """What the busy runs want since the last look; None when some run cannot be seen (a container's
        processes). A run is unmeasured until it is seen to compute on one look (it then wants what it ran),
        or to be idle on two looks in a row (it sleeps); a run younger than ``MEASURE_AFTER_S`` is not looked
        at: its start-up says nothing of it."""
        measured, unmeasured = 0.0, 0
        for worker in busy:
            if worker in self._computes:
                measured += 1.0
                continue
            seen = self._seen.get(worker)
            if seen is not None and self._asleep.get(worker, 0.0) > now:
                continue  # measured asleep a moment ago: reading its processes again each tick costs the server
            demand = worker.demand_s()
            if demand is None:
                return None
            self._seen[worker] = (now, demand)  # a young run's next look leaves out what its start-up took
            if seen is None or self._young.get(worker, 0.0) > now:
                unmeasured += 1
                continue
            # A run's processes share the one CPU its worker is pinned to: it never wants more than that.
            rate = self._rate[worker] = min(max(demand - seen[1], 0.0) / (now - seen[0]), 1.0)
            if rate >= ASLEEP_RATE:
                self._dozing.discard(worker)
                if self._woke.get(worker) == math.inf:  # it slept, and wakes: what it wants from now on counts
                    self._woke[worker] = seen[1]
                measured += rate
            elif worker in self._dozing:
                self._asleep[worker] = now + REMEASURE_ASLEEP_S
                self._woke[worker] = math.inf  # asleep: what it wants once it computes again starts here
                measured += rate
            else:
                # Idle on one look is not asleep: a run just handed a worker may wait for the server before its
                # program starts, and a worker that runs short programs one after another waits for the
                # server's next part now and then. Either computes on the next look.
                self._dozing.add(worker)
                unmeasured += 1
        return Demand(measured, unmeasured)

    def wants(self, own: Iterable[Measured], lent: Iterable[Measured], now: float) -> tuple[float, float, int]:
        """What the runs on the pool's ``own`` workers and on ``lent`` ones want: the CPUs of those measured
        (each on its own worker not measured yet counts as computing), the runs on lent workers not measured
        yet, and on how many ticks in a row the CPUs must be found idle before lending: 1 (the meter says a run
        is idle only on two looks in a row: a run just handed a worker may wait for the server before its
        program starts, and look idle for a moment); 0 where the runs cannot be seen (a container's). Runs on
        lent workers not measured yet (earlier steps) count in a step's size (see :func:`lend_now`), so lending
        goes on as they are measured."""
        mine, theirs = self.load(own, now), self.load(lent, now)
        if mine is None or theirs is None:
            return 0.0, 0.0, 0
        return mine.measured + mine.unmeasured + theirs.measured, theirs.unmeasured, 1

    def crowding(self, lent: Iterable[M], known: float, cpus: int) -> list[M]:
        """The runs of ``lent`` that must stand paused so that the runs measured computing (``known``, as
        :meth:`wants` says) want at most ``LEND_PER_CPU`` per CPU: the youngest of those that were found asleep
        and since they woke have computed (or waited to) for ``CROWDED_AFTER_S``, and have not stood paused
        before. A run that computes from its start was lent within what the CPUs hold (it counted as computing
        until measured), and a sleeper that wakes to print and exit wants a moment: neither stands paused."""
        excess = known - LEND_PER_CPU * cpus
        if excess <= CROWDED_MARGIN:
            return []
        computing = [
            w
            for w in lent
            if w not in self._computes
            and self._rate.get(w, 0.0) >= ASLEEP_RATE
            and self._seen[w][1] - self._woke.get(w, math.inf) >= CROWDED_AFTER_S
        ]
        out = []
        for worker in sorted(computing, key=lambda w: self._young.get(w, 0.0), reverse=True):
            if excess <= 0:
                break
            excess -= self._rate[worker]
            out.append(worker)
        return out


class CpuIdle:
    """How many of this process's CPUs were idle since the last look, from ``/proc/stat``."""

    def __init__(self) -> None:
        self.cpus = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        self.last = self._read()

    def _read(self) -> dict[str, tuple[int, int]]:
        """CPU -> (idle, total) jiffies."""
        out: dict[str, tuple[int, int]] = {}
        try:
            with open("/proc/stat") as f:
                for line in f:
                    name, _, rest = line.partition(" ")
                    if name in self.cpus:
                        ticks = [int(x) for x in rest.split()]
                        out[name] = (ticks[3] + ticks[4], sum(ticks[:8]))  # idle + iowait; all but guest time
        except OSError:
            pass
        return out

    def sample(self) -> float:
        """Idle CPUs (a fraction of a CPU counts) since the previous sample; 0.0 when it cannot tell."""
        now = self._read()
        idle = 0.0
        for cpu, (i1, t1) in now.items():
            i0, t0 = self.last.get(cpu, (i1, t1))
            if t1 > t0:
                idle += (i1 - i0) / (t1 - t0)
        self.last = now
        return idle


class Ticker:
    """The lending loop's clock: a tick every ``LEND_TICK_S`` while runs wait or workers start; otherwise
    one every ``QUIET_TICK_S``, or as soon as a run begins to wait (:meth:`wake`). An idle server then costs
    its CPUs nothing, and the runs of a server that is never short of workers pay for no tick."""

    def __init__(self) -> None:
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def next(self, busy: bool) -> None:
        if busy:
            await asyncio.sleep(LEND_TICK_S)
            return
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), QUIET_TICK_S)
