"""When a session's cell is interrupted (``agent/cell_clock.py``), on the kernel's counts as a loaded machine gives
them: looks a few milliseconds apart, and a session's CPU count that moves by a clock tick either way."""

from __future__ import annotations

import itertools

import pytest
from codegym_sandbox.agent import run_cpu
from codegym_sandbox.agent.cell_clock import PROBE_S, CellClock
from codegym_sandbox.agent.protocol import WAIT_CREDIT


class Kernel:
    """A session's kernel as the counts show it: ``ran`` seconds of CPU, runnable (``R``) or asleep."""

    def __init__(self) -> None:
        self.ran, self.state = 0.0, "R"
        self.noise = itertools.cycle([0.0, 0.01, -0.01, 0.01, 0.0])  # a tick, either way (a container's count)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(run_cpu, "task_times", lambda pid: (0.0, self.ran))
        monkeypatch.setattr(run_cpu, "task_state", lambda pid: (self.state, self.ran))
        monkeypatch.setattr(run_cpu, "runs_used_s", lambda meter, box: 1.0 + self.ran + next(self.noise))
        # Its waits counted so far: a short one early in the cell (one that has not ended is not counted yet).
        monkeypatch.setattr(run_cpu, "waited_since", lambda pid, zero, since, used: 0.026)


def _first_interrupt(clock: CellClock, kernel: Kernel, step_s: float, until_s: float, runs: bool) -> float | None:
    """Wake every ``step_s`` from the cell's limit on, as the agent's loop does at ``interrupt_at`` or for
    output; the kernel runs meanwhile or stands. The time after the start of the first interrupt, or None."""
    now = clock.started + clock.wall_s
    while now < clock.started + until_s:
        if now >= clock.interrupt_at and clock.due(now):
            return now - clock.started
        now += step_s
        if runs:
            kernel.ran += step_s
    return None


@pytest.mark.parametrize("step_s", [0.004, 0.013, PROBE_S, 0.2])
def test_a_kernel_that_stands_waiting_for_a_cpu_is_not_interrupted(
    monkeypatch: pytest.MonkeyPatch, step_s: float
) -> None:
    kernel = Kernel()
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0)
    # It stands at its limit and after, however often the agent looks: interrupted only at the credit's cap.
    at = _first_interrupt(clock, kernel, step_s, until_s=5.0, runs=False)
    assert at is not None and at >= 1.0 + WAIT_CREDIT * 1.0 - 0.05, at


@pytest.mark.parametrize("step_s", [0.004, 0.013, PROBE_S])
def test_a_kernel_that_runs_at_its_limit_is_interrupted_at_once(monkeypatch: pytest.MonkeyPatch, step_s: float) -> None:
    kernel = Kernel()
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0)
    at = _first_interrupt(clock, kernel, step_s, until_s=5.0, runs=True)
    assert at is not None and at <= 1.0 + 2 * PROBE_S + step_s, at


def test_a_kernel_asleep_at_its_limit_is_interrupted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = Kernel()
    kernel.state = "S"
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0)
    # At its limit and the wait counted before it, not a look later.
    assert _first_interrupt(clock, kernel, 0.004, until_s=5.0, runs=False) == pytest.approx(1.026, abs=0.005)


def test_a_kernel_that_waits_behind_its_own_sessions_processes_earns_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # It stands, and the session's CPU count grows as fast as time: its own children hold the CPU.
    kernel = Kernel()
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0)
    busy = {"s": 0.0}
    monkeypatch.setattr(run_cpu, "runs_used_s", lambda meter, box: busy["s"])
    now = clock.started + clock.wall_s
    while not (now >= clock.interrupt_at and clock.due(now)):
        now += 0.01
        busy["s"] += 0.01
    assert now - clock.started <= 1.0 + 2 * PROBE_S + 0.01


def test_a_pause_moves_the_limit_on_by_its_length_and_is_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # Paused 3 s (its slot given to a cell that waited: cell_pause.py), asleep before and after: interrupted at its
    # limit plus the pause, and the pause is not counted as a wait for a CPU (it stood stopped, not runnable).
    kernel = Kernel()
    kernel.state = "S"
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0)
    assert not clock.due(clock.started + 0.5)
    assert clock.moved(3.0) == 3.0
    assert not clock.due(clock.started + 3.9)
    assert _first_interrupt(clock, kernel, 0.004, until_s=9.0, runs=False) == pytest.approx(4.026, abs=0.005)


@pytest.mark.parametrize("step_s", [0.004, PROBE_S])
def test_a_cell_without_credit_is_interrupted_at_its_limit_however_long_it_waited(
    monkeypatch: pytest.MonkeyPatch, step_s: float
) -> None:
    # Its caller waits for its limit and no longer (sessions/cell_terms.py): a kernel that stands waiting for a CPU
    # at its limit, and had waited before, is interrupted then all the same.
    kernel = Kernel()
    kernel.install(monkeypatch)
    clock = CellClock(kernel=7, meter=None, box=1, wall_s=1.0, credit=False)
    assert _first_interrupt(clock, kernel, step_s, until_s=5.0, runs=False) == pytest.approx(1.0, abs=1e-9)
