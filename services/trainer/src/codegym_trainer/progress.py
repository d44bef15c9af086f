"""The live display of a run: step, reward, pass rate, and where the step's time went."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table


class ProgressDisplay:
    """A progress bar over the steps and a line of the last step's numbers (plain lines when not a terminal)."""

    def __init__(self, total_steps: int, console: Console, *, enabled: bool = True) -> None:
        self.console = console
        self.total = total_steps
        self.enabled = enabled and console.is_terminal
        self.bar = Progress(
            TextColumn("[bold]GRPO"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.bar.add_task("steps", total=total_steps)
        self.row: dict[str, str] = {}
        self.eval_line = "held-out pass@1: -"
        self._live: Live | None = None
        self._started = time.monotonic()

    def _render(self) -> Group:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for key in self.row:
            table.add_column(key, justify="right")
        if self.row:
            table.add_row(*self.row.values())
        return Group(self.bar, table, self.eval_line)

    def start(self, step: int = 0) -> None:
        self.bar.update(self.task, completed=step)
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.start()

    def step(self, step: int, metrics: dict[str, Any]) -> None:
        """Show the numbers logged for ``step``."""

        def fmt(key: str, spec: str = ".3f") -> str:
            value = metrics.get(key)
            return "-" if value is None else format(value, spec)

        self.row = {
            "step": f"{step}/{self.total}",
            "reward": fmt("reward"),
            "pass": fmt("verdicts/pass", ".0%"),
            "CE": fmt("verdicts/CE", ".0%"),
            "TLE": fmt("verdicts/TLE", ".0%"),
            "RE": fmt("verdicts/RE", ".0%"),
            "SE": fmt("verdicts/SE", ".0%"),
            "gen s": fmt("time/generation", ".1f"),
            "score s": fmt("time/scoring", ".2f"),
            "optim s": fmt("time/optimisation", ".1f"),
        }
        self.bar.update(self.task, completed=step)
        if self._live is not None:
            self._live.update(self._render())
        else:
            self.console.print("  ".join(f"{k} {v}" for k, v in self.row.items()), highlight=False)

    def evaluation(self, step: int, result: str) -> None:
        self.eval_line = f"held-out pass@1 at step {step}: {result}"
        if self._live is not None:
            self._live.update(self._render())
        else:
            self.console.print(self.eval_line, highlight=False)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
