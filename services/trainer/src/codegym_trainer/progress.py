"""The live display of a run: step, reward, pass rate, and where the step's time went."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from codegym_sandbox.verdicts import Verdict
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

Column = tuple[str, str, str]  # heading, metric logged for a step, format spec
TIMES: tuple[Column, ...] = (
    ("gen s", "time/generation", ".1f"),
    ("score s", "time/scoring", ".2f"),
    ("optim s", "time/optimisation", ".1f"),
)
CODE_COLUMNS: tuple[Column, ...] = (
    ("reward", "reward", ".3f"),
    ("pass", "verdicts/pass", ".0%"),
    *((v.value, f"verdicts/{v}", ".0%") for v in (Verdict.CE, Verdict.TLE, Verdict.RE, Verdict.SE)),
    *TIMES,
)


class ProgressDisplay:
    """A progress bar over the steps and a line of the last step's numbers (plain lines when not a terminal).

    ``columns`` are the task's own numbers (GRPO on code shows verdict rates; a game, its win rates), and
    ``evaluation`` names what its evaluations measure.
    """

    def __init__(
        self,
        total_steps: int,
        console: Console,
        *,
        enabled: bool = True,
        columns: Sequence[Column] = CODE_COLUMNS,
        evaluation: str = "held-out pass@1",
    ) -> None:
        self.console = console
        self.total = total_steps
        self.columns = tuple(columns)
        self.evaluation_name = evaluation
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
        self.eval_line = f"{evaluation}: -"
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

        def fmt(key: str, spec: str) -> str:
            value = metrics.get(key)
            return "-" if value is None else format(value, spec)

        self.row = {"step": f"{step}/{self.total}", **{head: fmt(key, spec) for head, key, spec in self.columns}}
        self.bar.update(self.task, completed=step)
        if self._live is not None:
            self._live.update(self._render())
        else:
            self.console.print("  ".join(f"{k} {v}" for k, v in self.row.items()), highlight=False)

    def evaluation(self, step: int, result: str) -> None:
        self.eval_line = f"{self.evaluation_name} at step {step}: {result}"
        if self._live is not None:
            self._live.update(self._render())
        else:
            self.console.print(self.eval_line, highlight=False)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
