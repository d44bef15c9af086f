"""The run's closing lines say what one run's before/after can and cannot show."""

from __future__ import annotations

from pathlib import Path

from codegym_trainer.evaluation import EvalPoint
from codegym_trainer.summary import RunSummary, caution, plot_rewards, verdict_shift


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


def test_the_summary_says_first_that_held_out_pass_at_1_is_the_result_and_a_short_curve_is_noise() -> None:
    before = point(0, 2, 8, {"AC": 2, "CE": 6}, (0.0, 0.5))
    after = point(6, 3, 8, {"AC": 3, "CE": 5}, (0.125, 0.75))
    summary = RunSummary(steps=6, rewards=[(1, 0.1), (6, 0.2)], evals=[before, after], seconds=60)
    reading = summary.reading()
    assert "held-out pass@1" in reading[0] and "0.250 [0.000, 0.500] -> 0.375 [0.125, 0.750]" in reading[0]
    assert "6 steps" in reading[1] and "noise" in reading[1]
    assert summary.lines()[: len(reading)] == [f"read this: {line}" for line in reading]
    assert summary.to_dict()["reading"] == reading
    long_run = RunSummary(steps=500, rewards=[(1, 0.1)], evals=[before, after], seconds=60)
    assert len(long_run.reading()) == 1 and "noise" not in long_run.reading()[0]


def test_the_plot_draws_held_out_pass_at_1_with_its_interval_and_is_titled_with_the_reading(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = point(0, 2, 8, {"AC": 2}, (0.0, 0.5))
    after = point(6, 3, 8, {"AC": 3}, (0.125, 0.75))
    drawn: list[str] = []
    real_savefig = plt.Figure.savefig

    def record(fig: plt.Figure, *args: object, **kwargs: object) -> None:
        ax = fig.axes[0]
        drawn.append(ax.get_title())
        drawn.extend(text.get_text() for text in ax.get_legend().get_texts())
        real_savefig(fig, *args, **kwargs)

    plt.Figure.savefig = record  # type: ignore[method-assign]
    try:
        path = plot_rewards([(1, 0.1), (6, 0.2)], [before, after], tmp_path / "curve.png")
    finally:
        plt.Figure.savefig = real_savefig  # type: ignore[method-assign]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "The result: held-out pass@1" in drawn[0] and "noise" in drawn[0]
    assert "held-out pass@1 (95% interval)" in drawn
