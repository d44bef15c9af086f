"""The lending policy's decisions, on a pool of fake workers whose CPU demand the test sets.

Each fake run either computes (it wants a whole CPU for as long as it runs) or sleeps (it wants none), and
ends when the test says; the pool's ticks are driven here, one at a time, so that what is asserted is what
the policy decided, never how fast this machine is.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from codegym_sandbox.backends import lending, pool
from codegym_sandbox.backends.base import RunOutcome, RunPolicy, RunRequest
from codegym_sandbox.backends.lending import (
    LEND_PER_CPU,
    LEND_TICK_S,
    PARKED_SHARE,
    PARKED_WORKER_MB,
    keep_open,
    lend_now,
    reserve,
)
from codegym_sandbox.backends.worker import AgentWorker, tree_demand_s

CPUS = 2


class FakeRun:
    def __init__(self, cpu: float | None) -> None:
        self.cpu = cpu  # CPUs it wants while it runs; None: the server cannot see it (a container's)
        self.started = asyncio.Event()
        self.done = asyncio.Event()


class FakeWorker(AgentWorker):
    """A worker with no process: its runs are :class:`FakeRun`, its demand what they want."""

    def __init__(self, slot: int, runs: dict[int, FakeRun]) -> None:
        super().__init__(slot, {})
        self.fake_runs = runs
        self.spent = 0.0  # demand of the runs before this one
        self.current: tuple[FakeRun, float] | None = None
        self.exited = asyncio.Event()

    async def start(self) -> None:
        self.tools = {"python3": "/usr/bin/python3"}

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    async def wait_exited(self) -> None:
        await self.exited.wait()

    async def kill(self) -> None:
        self.exited.set()

    def demand_s(self) -> float | None:
        if self.current is None:
            return self.spent
        run, since = self.current
        return None if run.cpu is None else self.spent + run.cpu * (time.monotonic() - since)

    async def run(self, req: RunRequest) -> RunOutcome:
        fake = self.fake_runs[id(req)]
        self.current = (fake, time.monotonic())
        fake.started.set()
        try:
            await fake.done.wait()
        finally:
            self.spent = self.demand_s() or 0.0
            self.current = None
        return RunOutcome(0, None, 0.0, 0.0, None, False, False, b"", b"")


class FakePool(pool.WorkerPool):
    def __init__(self, workers: int, max_workers: int, queue_size: int = 1000) -> None:
        super().__init__(workers, queue_size=queue_size, config={})
        self.max_workers = max_workers
        self.cpus = CPUS
        self.fake_runs: dict[int, FakeRun] = {}

    def make_worker(self, slot: int) -> AgentWorker:
        return FakeWorker(slot, self.fake_runs)

    def submit(
        self, cpu: float | None, memory_mb: int = 64, policy: RunPolicy = RunPolicy()
    ) -> tuple[FakeRun, asyncio.Task[RunOutcome]]:
        req = RunRequest(files={}, argv=[], env={}, limits={"wall_s": 1.0, "address_space_bytes": memory_mb << 20})
        fake = self.fake_runs[id(req)] = FakeRun(cpu)
        task = asyncio.get_running_loop().create_task(self.run(req, policy))
        task.add_done_callback(lambda _: self.fake_runs.pop(id(req), None))
        return fake, task

    async def tick(self, idle_cpus: float | None = None) -> None:
        """One tick of the lending loop, with the CPUs' idle reading given (where runs cannot be seen, it is
        all lending has), or else what the runs in progress leave idle."""
        await asyncio.sleep(LEND_TICK_S)
        if idle_cpus is None:
            wanted = sum(r.cpu or 0.0 for r in self.fake_runs.values() if r.started.is_set() and not r.done.is_set())
            idle_cpus = max(0.0, CPUS - wanted)
        self._lend_tick(time.monotonic(), idle_cpus)
        await asyncio.sleep(0.01)  # let lent runs reach their workers, and started workers come up

    def running(self, runs: list[FakeRun]) -> int:
        return sum(r.started.is_set() and not r.done.is_set() for r in runs)


def drive(
    body: Callable[[FakePool], Awaitable[None]], workers: int = 2, max_workers: int = 128, queue_size: int = 1000
) -> None:
    """Run ``body`` against a started pool whose lending loop the test drives itself."""

    async def main() -> None:
        fake = FakePool(workers, max_workers, queue_size)
        idle_loop = fake._lend

        async def no_loop() -> None:  # ticks come from the test, not from a timer
            return None

        fake._lend = no_loop  # type: ignore[method-assign]
        await fake.start()
        try:
            await body(fake)
        finally:
            fake._lend = idle_loop  # type: ignore[method-assign]
            await fake.stop()

    asyncio.run(main())


def end(runs: list[FakeRun]) -> None:
    for r in runs:
        r.done.set()


@pytest.mark.parametrize(
    ("known", "unknown", "waiting", "room", "lent"),
    [
        (0.0, 0, 16, 100, LEND_PER_CPU * CPUS),  # idle CPUs: one step, never one worker per waiting run
        (0.0, 0, 3, 100, 3),
        (0.0, 0, 16, 5, 5),  # max_workers
        (1.4, 0, 16, 100, math.floor(LEND_PER_CPU * CPUS - 1.4)),  # the runs in progress count
        (0.0, 4, 16, 100, LEND_PER_CPU * CPUS - 4),  # lent runs not measured yet count in the step, as computing
        (0.5, LEND_PER_CPU * CPUS, 16, 100, 0),  # a whole step not measured yet: nothing more
        (CPUS - 0.4, 0, 16, 100, 0),  # the CPUs are busy: nothing
        (8.0, 0, 16, 100, 0),
        (0.0, 0, 0, 100, 0),
    ],
)
def test_lending_lends_what_idle_cpus_can_carry(known: float, unknown: int, waiting: int, room: int, lent: int) -> None:
    assert lend_now(CPUS, known, unknown, waiting, room) == lent
    assert keep_open(CPUS, known) == (known <= CPUS - lending.LEND_IDLE_CPUS)


def test_a_run_is_asleep_only_on_two_idle_looks_in_a_row() -> None:
    """A run idle on one look may be waiting for the server (its program not started, or between two parts
    of a test series): it counts as not measured, so a tick that falls in such a gap lends nothing on it."""

    class Run:
        def __init__(self) -> None:
            self.demand = 0.0

        def demand_s(self) -> float:
            return self.demand

    meter, run, t = lending.DemandMeter(), Run(), time.monotonic()

    def look(at: float) -> tuple[float, int]:
        demand = meter.load([run], at)
        assert demand is not None
        return round(demand.measured, 6), demand.unmeasured

    meter.started(run, lending=True)
    t += lending.MEASURE_AFTER_S + 0.01
    assert look(t) == (0.0, 1)  # start-up: not looked at
    run.demand += 0.01
    t += 0.01
    assert look(t) == (1.0, 0)  # it computes
    t += 0.01
    assert look(t) == (0.0, 1)  # idle once: not known
    run.demand += 0.005
    t += 0.01
    assert look(t) == (0.5, 0)  # it computes again
    for looks in range(2):
        t += 0.01
        assert look(t) == ((0.0, 0) if looks else (0.0, 1))
    t += 0.01
    assert look(t) == (0.0, 0)  # asleep: not looked at again for a while ...
    run.demand += 1.0
    assert look(t + lending.REMEASURE_ASLEEP_S) == (1.0, 0)  # ... then it is


def test_the_youngest_lent_sleepers_that_turn_to_compute_past_the_cpus_stand_paused_once() -> None:
    """Eight runs lent while they slept now compute, beside two on the pool's own workers (counted as
    computing): past LEND_PER_CPU a CPU, the youngest of them stand paused once they have computed for
    CROWDED_AFTER_S. A run that sleeps does not, nor one that computed from its start (it was lent as
    computing), nor one that stood paused before (it counts as computing from then on, and is never read)."""

    class Run:
        def __init__(self) -> None:
            self.demand = 0.0

        def demand_s(self) -> float:
            return self.demand

    meter = lending.DemandMeter()
    lent, sleeper, busy, again = [Run() for _ in range(8)], Run(), Run(), Run()
    for run in [*lent, sleeper]:
        meter.started(run, lending=True)
        time.sleep(0.001)  # the youngest is the last started
    meter.started(again, lending=True)
    meter.computing(again)
    t = time.monotonic()  # the looks come after every start-up
    own, runs = [Run(), Run()], [busy, *lent, sleeper, again]

    def look(step: float, wake: bool) -> tuple[float, float]:
        nonlocal t
        t += step
        for run in [*own, busy, *(lent if wake else [])]:
            run.demand += step  # computing (or waiting to) all the time
        known, unknown, _ = meter.wants(own, runs, t)
        return round(known, 2), unknown

    assert look(0.1, False) == (2 + 1, 1 + 8 + 1)  # the first look at busy takes its starting point; idle once
    assert look(0.1, False) == (2 + 1 + 1, 0)  # asleep (the sleeper too)
    assert meter.crowding(runs, 11.0, CPUS) == []
    assert look(lending.REMEASURE_ASLEEP_S, True) == (2 + 1 + 1 + 8, 0)  # the eight wake, and compute
    assert meter.crowding(runs, 12.0, CPUS) == []  # for a moment only, so far: nothing stands paused
    assert look(lending.CROWDED_AFTER_S, True) == (12.0, 0)
    excess = 12.0 - LEND_PER_CPU * CPUS
    assert meter.crowding(runs, 12.0, CPUS) == lent[::-1][: math.ceil(excess)]
    assert meter.crowding(runs, LEND_PER_CPU * CPUS + lending.CROWDED_MARGIN, CPUS) == []


@pytest.mark.parametrize(
    ("room", "wanted", "budget_mb", "size"),
    [
        (126, None, 1000 * PARKED_SHARE * PARKED_WORKER_MB, 126),  # every slot lending may add ...
        (126, None, 40 * PARKED_SHARE * PARKED_WORKER_MB + 5, 40),  # ... that fits in its share of the budget
        (126, None, 100, 0),
        (126, 7, 100, 7),  # as the server's setting says, memory or not
        (5, 7, 10**6, 5),  # never beyond max_workers
        (126, 0, 10**6, 0),
    ],
)
def test_the_reserve_is_every_slot_lending_may_add_within_its_share_of_memory(
    room: int, wanted: int | None, budget_mb: int, size: int
) -> None:
    assert reserve(room, wanted, budget_mb) == size


@pytest.mark.parametrize("sleepers", [2, 12])
def test_runs_that_compute_after_sleepers_get_no_more_than_a_step_of_lent_workers(sleepers: int) -> None:
    """The issue's case: sleepers hold the pool's workers, then a burst of runs that compute arrives. One
    step of lent workers is started, then none while they compute; a lent worker whose run ends is parked."""
    step = LEND_PER_CPU * CPUS

    async def body(p: FakePool) -> None:
        sleeping = [p.submit(0.0)[0] for _ in range(sleepers)]
        for _ in range(2 + 2 * math.ceil((sleepers - 2) / step)):  # those beyond the pool's own two are lent workers
            await p.tick()
        assert p.running(sleeping) == sleepers
        await p.tick()  # with nothing waiting
        computing = [p.submit(1.0)[0] for _ in range(16)]
        await asyncio.sleep(0.01)
        assert p.running(computing) == 0  # what the sleepers were lent is parked, not open to the burst
        ticks = 0
        while p.running(computing) == 0:
            await p.tick()
            ticks += 1
            assert ticks <= 3  # a first reading of runs not measured before, then two idle ones
        lent = p.running(computing)
        # Never on one idle reading; a step, less a CPU where a sleeper not measured yet counts as computing.
        assert ticks >= 2 and step - 1 <= lent <= step
        for _ in range(3):
            await p.tick()
            assert p.running(computing) == lent  # they compute: no more
        end(computing[:2])
        await asyncio.sleep(0.01)
        assert p.running(computing) == lent - 2  # their workers were parked, not handed the next runs
        end(sleeping + computing)

    drive(body)


def test_what_ran_before_leaves_no_open_worker_for_the_next_burst() -> None:
    """Forty sleepers are lent workers; once they end, a burst of runs that compute finds only the pool's own
    workers open, and gets one step more: the same as on a fresh pool."""

    async def body(p: FakePool) -> None:
        sleeping = [p.submit(0.0)[0] for _ in range(40)]
        for _ in range(2 + 2 * math.ceil(38 / (LEND_PER_CPU * CPUS))):  # each step measured idle twice
            await p.tick()
        assert p.running(sleeping) == 40 and p.lent >= 38
        end(sleeping)
        await p.tick()
        assert p.status()["parked"] >= 38
        computing = [p.submit(1.0)[0] for _ in range(16)]
        await asyncio.sleep(0.01)
        assert p.running(computing) == 2
        await p.tick()
        await p.tick()
        assert p.running(computing) == 2  # the pool's own workers compute: the CPUs are busy, nothing is lent
        end(computing)

    drive(body)


def test_sleepers_are_lent_workers_a_step_a_tick() -> None:
    """A hundred sleepers on two workers: all run after two ticks for each step of lending they need."""

    async def body(p: FakePool) -> None:
        sleeping = [p.submit(0.0)[0] for _ in range(100)]
        ticks = 0
        while p.running(sleeping) < 100:
            await p.tick()
            ticks += 1
            # Two idle looks at the pool's own runs, then a step each time the last one is seen idle twice (and
            # one tick of slack).
            assert ticks <= 2 + 2 * math.ceil(98 / (LEND_PER_CPU * CPUS)) + 1, p.status()
        end(sleeping)

    drive(body)


@pytest.mark.parametrize(("idle_cpus", "lends"), [(2.0, True), (0.2, False)])
def test_where_runs_cannot_be_seen_the_cpus_idle_time_decides(idle_cpus: float, lends: bool) -> None:
    async def body(p: FakePool) -> None:
        unseen = [p.submit(None)[0] for _ in range(20)]
        await p.tick(idle_cpus)
        await p.tick(idle_cpus)
        assert p.running(unseen) == (2 + LEND_PER_CPU * CPUS if lends else 2)
        end(unseen)

    drive(body)


def test_start_up_starts_the_reserve_a_step_a_tick_before_the_pool_says_it_is_ready() -> None:
    """A burst of sleepers sent as soon as the server is ready must find its workers started: the pool is
    warming (the server answers /readyz 503) until the reserve is parked, and stays ready once it was."""

    async def body(p: FakePool) -> None:
        target = reserve(126, None, p.memory.total_mb)
        assert target > 2 * LEND_PER_CPU * CPUS
        assert p.status()["warming"] and p.status()["reserve"] == target
        await p.tick()
        await asyncio.sleep(0.01)
        assert p.status()["parked"] == LEND_PER_CPU * CPUS and p.status()["warming"]  # a step a tick
        ticks = 1
        while len(p._parked) < target:  # nobody asks for the status meanwhile: the pool keeps track itself
            await p.tick()
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == math.ceil(target / (LEND_PER_CPU * CPUS))
        sleeping = [p.submit(0.0)[0] for _ in range(8)]
        while not p.lent:
            await p.tick()
        status: dict[str, Any] = p.status()
        assert status["parked"] < target and not status["warming"]  # ready, and stays so
        assert 0 <= status["worker_start_s"] < 1
        end(sleeping)

    drive(body)


def test_warming_ends_when_a_start_fails_or_takes_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server must not stay unready for a reserve it cannot start: a failed start ends the wait (lending
    starts none for a while after one), and so does ``READY_WITHIN_S``."""

    class Unstartable(FakeWorker):
        async def start(self) -> None:
            raise RuntimeError("no room for another worker")

    async def failing(p: FakePool) -> None:
        p.make_worker = lambda slot: Unstartable(slot, p.fake_runs)  # type: ignore[method-assign]
        assert p.status()["warming"]
        await p.tick()
        await asyncio.sleep(0.01)
        assert p.status()["parked"] == 0 and not p.status()["warming"]

    drive(failing)
    monkeypatch.setattr(lending, "READY_WITHIN_S", 0.0)

    async def slow(p: FakePool) -> None:
        await asyncio.sleep(0.01)
        assert p.status()["parked"] == 0 and not p.status()["warming"]

    drive(slow)


def test_the_reserve_is_not_refilled_while_runs_wait() -> None:
    """Starting workers takes the CPUs that the runs lent parked workers start on: while runs wait, only the
    workers that lending grants are started, and the reserve is refilled once none waits."""

    async def body(p: FakePool) -> None:
        p.reserve_workers = 4
        runs = [p.submit(0.0)[0] for _ in range(4)]  # two take the pool's workers, two wait
        await p.tick(idle_cpus=CPUS)  # too soon to lend to them (LEND_AFTER_S), and the CPUs are idle
        assert p.status()["starting"] == 0 and p.status()["parked"] == 0 and p.running(runs) == 2
        end(runs)
        await asyncio.sleep(0.01)
        await p.tick(idle_cpus=CPUS)
        assert p.status()["parked"] == 4

    drive(body)


def test_an_idle_pool_ticks_seldom_and_a_run_that_waits_wakes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing waiting and nothing starting, the lending loop sleeps (an idle server costs no CPU, and
    runs that always find a worker pay for no tick); the first run that waits brings its ticks back at once,
    and one tick after the last run waited parks what was lent and left open."""
    monkeypatch.setattr(lending, "QUIET_TICK_S", 0.5)

    async def main() -> None:
        p = FakePool(2, 16)
        ticks: list[tuple[float, int]] = []
        tick = p._lend_tick

        def counted(now: float, idle_cpus: float) -> None:
            ticks.append((now, len(p._waiters)))
            tick(now, idle_cpus)

        p._lend_tick = counted  # type: ignore[method-assign]
        await p.start()
        try:
            await asyncio.sleep(0.3)  # the reserve is started (fast ticks while workers start), then quiet
            assert p.status()["starting"] == 0
            quiet_from = len(ticks)
            await asyncio.sleep(0.4)
            assert len(ticks) - quiet_from <= 1
            runs = [p.submit(0.0)[0] for _ in range(3)]  # two own workers, and one run that waits
            began = time.monotonic()
            await asyncio.sleep(0.1)
            waited = [t for t, waiting in ticks if t >= began and waiting]
            assert waited and waited[0] - began < 0.05 and len(waited) >= 3
            end(runs)
            await asyncio.sleep(0.1)
            after = [t for t, waiting in ticks if t >= began and not waiting]
            assert after, "no tick after the last run waited"
            assert all(w.slot < p.size for w in list(p._idle._queue))  # nothing lent is left open
        finally:
            await p.stop()

    asyncio.run(main())


def test_the_reserve_is_started_only_while_the_cpus_are_idle() -> None:
    """Workers started ahead take CPU as they start: not while a queue of runs that compute holds the CPUs
    (they would slow those runs, and lending waits for idle CPUs anyway); once the CPUs are idle, they are."""

    async def body(p: FakePool) -> None:
        computing = [p.submit(1.0)[0] for _ in range(8)]
        for _ in range(4):
            await p.tick()
            status = p.status()
            assert status["parked"] == 0 and status["starting"] == 0 and p.lent == 0, status
        assert p.running(computing) == 2
        end(computing)
        await asyncio.sleep(0.01)
        await p.tick()
        await asyncio.sleep(0.05)
        assert p.status()["parked"] > 0

    drive(body)


def test_a_process_computing_in_a_thread_wants_a_cpu() -> None:
    # Its main thread waits in join while another computes: it wants a CPU as much as one whose main thread
    # computes (a cell that computes in a thread must not be seen asleep, nor a run lent a worker as a sleeper).
    code = (
        "import threading, time\n"
        "def spin():\n    t = time.monotonic()\n    while time.monotonic() - t < 1.5: pass\n"
        "th = threading.Thread(target=spin); th.start(); th.join()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)
        before, at = tree_demand_s(proc.pid), time.monotonic()
        time.sleep(0.6)
        after, now = tree_demand_s(proc.pid), time.monotonic()
        assert before is not None and after is not None
        assert (after - before) / (now - at) > 0.5, (before, after)
    finally:
        proc.kill()
        proc.wait()
