"""When a running cell is seen asleep (``backends/cell_turns.asleep``), on demand counts a test sets: the average
over the last window is what holding a slot costs, and a cell that has just woken to compute is not asleep."""

from __future__ import annotations

from codegym_sandbox.backends.cell_turns import IDLE_RATE, LOOK_S, RunningCell, asleep


def _looks(rate_at: list[float], share: int = 1) -> list[bool]:
    """``asleep`` at each look, LOOK_S apart, where the cell's processes ran ``rate_at[i]`` of a CPU before look i."""
    cell = RunningCell(lease=None, pausable=True, worker=None, since=0.0, limit_s=10.0)  # type: ignore[arg-type]
    demand, out = 0.0, []
    for i, rate in enumerate(rate_at):
        demand += rate * LOOK_S
        out.append(asleep(cell, i * LOOK_S, False, share, lambda d=demand: d))
    return out


def test_a_cell_that_wakes_for_a_moment_now_and_then_is_asleep() -> None:
    # 30 ms of work in every 250 (an eighth of a CPU): a busy look now and then does not keep it "computing".
    pattern = ([0.6] + [0.0] * 4) * 8
    assert any(_looks(pattern)[6:]), _looks(pattern)


def test_a_cell_that_computes_or_has_just_woken_is_not_asleep() -> None:
    assert not any(_looks([1.0] * 30))
    woke = _looks([0.0] * 20 + [1.0] * 10)
    assert any(woke[:20]) and not any(woke[20:]), woke  # asleep while it slept; not from its first busy look


def test_a_family_is_asleep_under_a_quarter_of_a_cpu_for_each_slot_it_holds() -> None:
    half = [IDLE_RATE * 1.5] * 30  # three eighths of a CPU: over one slot's quarter, under two slots'
    assert not any(_looks(half, share=1)) and any(_looks(half, share=2))
