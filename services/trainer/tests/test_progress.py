from __future__ import annotations

import io

from codegym_trainer.progress import ProgressDisplay
from rich.console import Console


def _lines(display: ProgressDisplay, console: Console) -> list[str]:
    display.start()
    display.step(1, {"reward": 0.5, "verdicts/pass": 0.25, "selfplay/first/win_rate": 0.75, "time/generation": 2.0})
    display.evaluation(1, "0.400")
    display.stop()
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue().splitlines()


def test_code_runs_show_verdict_rates() -> None:
    console = Console(file=io.StringIO(), width=200)
    lines = _lines(ProgressDisplay(4, console), console)
    assert lines[0] == "step 1/4  reward 0.500  pass 25%  CE -  TLE -  RE -  SE -  gen s 2.0  score s -  optim s -"
    assert lines[1] == "held-out pass@1 at step 1: 0.400"


def test_a_task_shows_its_own_numbers() -> None:
    console = Console(file=io.StringIO(), width=200)
    columns = [("reward", "reward", ".2f"), ("first wins", "selfplay/first/win_rate", ".0%")]
    lines = _lines(ProgressDisplay(4, console, columns=columns, evaluation="wins vs random"), console)
    assert lines[0] == "step 1/4  reward 0.50  first wins 75%"
    assert lines[1] == "wins vs random at step 1: 0.400"
