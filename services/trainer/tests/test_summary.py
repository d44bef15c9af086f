"""The run's closing lines say what one run's before/after can and cannot show."""

from __future__ import annotations

from codegym_trainer.evaluation import EvalPoint
from codegym_trainer.summary import RunSummary, caution, verdict_shift


def point(step: int, solved: int, tasks: int, verdicts: dict[str, int], interval: tuple[float, float]) -> EvalPoint:
    return EvalPoint(step, solved / tasks, solved, tasks, 0, verdicts, 1.0, interval=interval)


def test_a_small_gain_inside_the_intervals_is_not_called_learning() -> None:
    before = point(0, 2, 8, {"AC": 2, "CE": 3, "WA": 3}, (0.0, 0.5))
    after = point(6, 7, 8, {"AC": 7, "WA": 1}, (0.625, 1.0))
    line = caution(before, after)
    assert "8 held-out problems" in line and "0.125" in line
    assert "3 fewer compile errors" in line and "format" in line
    assert "does not show learning" not in line  # these intervals do not overlap
    overlapping = caution(before, point(6, 3, 8, {"AC": 3, "WA": 5}, (0.125, 0.75)))
    assert "the intervals overlap, so this +0.125 does not show learning" in overlapping


def test_verdict_shift_lists_every_verdict_pass_first() -> None:
    assert verdict_shift({"CE": 3, "AC": 2}, {"AC": 7, "WA": 1}) == "AC 2 -> 7, CE 3 -> 0, WA 0 -> 1"


def test_summary_lines_carry_intervals_and_the_caution() -> None:
    before = point(0, 2, 8, {"AC": 2, "CE": 6}, (0.0, 0.5))
    after = point(6, 3, 8, {"AC": 3, "CE": 5}, (0.125, 0.75))
    lines = RunSummary(steps=6, rewards=[(1, 0.1), (6, 0.2)], evals=[before, after], seconds=60).lines()
    text = "\n".join(lines)
    assert "held-out pass@1 before: 0.250 [0.000, 0.500] greedy (2/8)" in text
    assert "held-out pass@1 after:  0.375 [0.125, 0.750] greedy (3/8)" in text
    assert "AC 2 -> 3, CE 6 -> 5" in text and "bench/learning_curve.py" in text
