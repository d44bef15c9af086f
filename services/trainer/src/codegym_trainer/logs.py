"""Where metrics go: a JSONL file and TensorBoard always, W&B when a project is configured."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

METRICS_FILE = "metrics.jsonl"


class MetricsSink:
    """Writes one JSON object per logged step to ``metrics.jsonl`` and the same scalars to TensorBoard.

    Not ``enabled`` (a training process other than the first: they all log the same gathered numbers), it
    opens nothing and writes nothing.
    """

    def __init__(self, output_dir: Path, *, wandb_enabled: bool = False, enabled: bool = True) -> None:
        self.path = output_dir / METRICS_FILE
        self.enabled = enabled
        self._wandb = wandb_enabled
        if not enabled:
            return
        output_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")  # noqa: SIM115  (kept open for the run; closed by close())
        self._tb = SummaryWriter(log_dir=str(output_dir / "tensorboard"))

    def write(self, step: int, metrics: dict[str, Any], *, kind: str = "train") -> None:
        """Record ``metrics`` at ``step`` (non-numeric values go to the JSONL file only)."""
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
        row = {"step": step, "kind": kind, "time": time.time(), **clean}
        self._file.write(json.dumps(row, default=str) + "\n")
        self._file.flush()
        for key, value in clean.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
                self._tb.add_scalar(key if "/" in key else f"{kind}/{key}", value, step)
        self._tb.flush()
        if self._wandb and kind == "eval":
            import wandb

            if wandb.run is not None:
                wandb.log({k: v for k, v in clean.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        if not self.enabled:
            return
        self._file.close()
        self._tb.close()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics file."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
