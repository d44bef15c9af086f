"""TRL's GRPOTrainer with the time of each step split into generation, scoring and optimisation.

The split is logged every step (``time/generation``, ``time/scoring``, ``time/optimisation`` and
``time/scoring_share``: the share of the step spent waiting for rewards), and every
``completions_interval`` steps the completions table (prompt, completion, verdict, tests, reward,
advantage) is written to ``<output_dir>/completions/step_NNNNN.jsonl`` (and to W&B when it is on).

Advantages stay TRL's: group-normalised rewards, with masked (None) rewards left out of the group
baseline and given an advantage of 0. :func:`group_advantages` computes the same thing for the tests.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from trl.trainer.grpo_trainer import GRPOTrainer


@dataclass
class StepTiming:
    """Seconds spent in each phase of the last optimisation step."""

    generation: float = 0.0
    scoring: float = 0.0
    total: float = 0.0
    history: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def optimisation(self) -> float:
        return max(self.total - self.generation - self.scoring, 0.0)

    @property
    def scoring_share(self) -> float:
        return self.scoring / self.total if self.total > 0 else 0.0


def group_advantages(rewards: list[float | None], group_size: int, *, scale: bool = True) -> list[float]:
    """GRPO advantages: each reward minus its group's mean (over scored members), over the group's std.

    A masked reward (None) is left out of its group's statistics and gets advantage 0.

    >>> [round(a, 3) for a in group_advantages([1.0, 0.0, None, 0.0], 4)]
    [1.155, -0.577, 0.0, -0.577]
    """
    if len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    values = torch.tensor([math.nan if r is None else r for r in rewards], dtype=torch.float64)
    groups = values.view(-1, group_size)
    mean = torch.nanmean(groups, dim=1, keepdim=True)
    centred = groups - mean
    if scale:
        count = (~torch.isnan(groups)).sum(dim=1, keepdim=True).clamp(min=2)
        std = torch.sqrt(torch.nansum(centred**2, dim=1, keepdim=True) / (count - 1))
        centred = centred / (std + 1e-4)
    return [float(a) for a in torch.nan_to_num(centred, nan=0.0).view(-1)]


class CodegymGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that times its phases and writes a completions table every N steps."""

    def __init__(self, *args: Any, completions_interval: int = 5, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.completions_interval = completions_interval
        self.timing = StepTiming()
        self._phase_generation = 0.0
        self._phase_scoring = 0.0

    def _generate(self, prompts: list[Any]) -> Any:
        start = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            self._phase_generation += time.perf_counter() - start

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        start = time.perf_counter()
        try:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self._phase_scoring += time.perf_counter() - start

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        # generation and scoring happen inside the first micro-step of an optimisation step
        start = time.perf_counter()
        loss: torch.Tensor = super().training_step(model, inputs, num_items_in_batch)  # type: ignore[no-untyped-call]
        self.timing.total += time.perf_counter() - start
        if self._step % self.current_gradient_accumulation_steps == 0:
            t = self.timing
            t.generation, t.scoring = self._phase_generation, self._phase_scoring
            t.history.append((t.generation, t.scoring, t.optimisation))
            metrics = self._metrics["train"]
            metrics["time/generation"].append(t.generation)
            metrics["time/scoring"].append(t.scoring)
            metrics["time/optimisation"].append(t.optimisation)
            metrics["time/scoring_share"].append(t.scoring_share)
            self._phase_generation = self._phase_scoring = 0.0
            self._last_total = t.total
            t.total = 0.0
        return loss

    @property
    def last_step_seconds(self) -> float:
        """Wall time of the last finished optimisation step."""
        return float(getattr(self, "_last_total", 0.0))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        training = self.model is not None and self.model.training
        step = self.state.global_step
        if training and step and step % self.completions_interval == 0 and self.accelerator.is_main_process:
            self._write_completions(step)
        super().log(logs, start_time)

    def _write_completions(self, step: int) -> None:
        logs: dict[str, Any] = self._logs
        rewards = {name: list(values) for name, values in logs["rewards"].items()}
        extra = {name: list(values) for name, values in logs["extra"].items()}
        rows = []
        for i, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"], strict=False)):
            row: dict[str, Any] = {"step": step, "prompt": prompt, "completion": completion}
            for name, values in extra.items():
                row[name] = values[i] if i < len(values) else None
            for name, values in rewards.items():
                value = values[i] if i < len(values) else None
                row["reward" if len(rewards) == 1 else f"reward/{name}"] = (
                    None if value is None or math.isnan(value) else value
                )
            row["advantage"] = logs["advantages"][i] if i < len(logs["advantages"]) else None
            rows.append(row)
        out = Path(str(self.args.output_dir)) / "completions"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / f"step_{step:05d}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row, default=str) + "\n")
        if self.args.report_to and "wandb" in self.args.report_to:
            import wandb

            if wandb.run is not None and rows:
                columns = list(rows[0])
                table = wandb.Table(
                    columns=columns, data=[[json.dumps(r[c], default=str) for c in columns] for r in rows]
                )
                wandb.log({"completions": table}, step=step)
