"""Evidence that GRPO learns: a tiny model, a reward that is easy to move, several seeds.

The task asks for a program; each completion is one token of a tiny, randomly initialised model whose
BPE vocabulary holds a few one-line programs (``print(1)``, ``x = 1``, digits) among fragments and prose.
The ``execution`` reward runs each completion in the sandbox (+1 prints, +0.5 runs silently, -0.5 syntax
error, -1 runtime error), so the policy can climb by putting its mass on the tokens that are programs.
For every seed the whole trainer runs (TRL's GRPOTrainer, the sandbox reward over HTTP) and the mean
reward of the last steps is compared with that of the first steps.

    python bench/learning_signal.py            # 3 seeds x 40 steps; --help
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codegym_evaluator.servers import sandbox_server
from codegym_trainer.config import TrainConfig
from codegym_trainer.run import run
from rich.console import Console

# the tiny model is the trainer tests' fixture, not part of the shipped trainer
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "services" / "trainer" / "tests"))
from tiny_model import build_tiny_model

TASK = {
    "task_id": "bench/any-program",
    "prompt": "Write a Python program that prints something.",
    "kind": "stdio",
    "tests": [{"stdin": "", "expected_stdout": "1\n"}],
}


@dataclass
class SeedResult:
    seed: int
    first: float
    last: float
    seconds: float

    @property
    def gain(self) -> float:
        return self.last - self.first


def learning_run(
    seed: int, steps: int, window: int, sandbox_url: str, workdir: Path, learning_rate: float = 3e-2
) -> SeedResult:
    """Train a fresh tiny model for ``steps`` and return its mean reward over the first and last ``window``."""
    model = build_tiny_model(workdir / f"model-{seed}", seed=seed)
    tasks = workdir / "task.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    config = TrainConfig(
        model=str(model),
        dataset="jsonl",
        dataset_path=str(tasks),
        reward_scheme="execution",
        train_steps=steps,
        batch_size=1,
        group_size=16,
        max_completion_length=1,
        train_temperature=1.0,
        learning_rate=learning_rate,
        seed=seed,
        skip_eval=True,
        sandbox_url=[sandbox_url],
        save_steps=10_000,
        completions_interval=10_000,
        output_dir=workdir / f"run-{seed}",
        progress=False,
        threads=1,
    )
    summary = run(config, console=Console(file=io.StringIO()))
    rewards = [r for _, r in summary.rewards]
    if len(rewards) < 2 * window:
        raise SystemExit(f"seed {seed}: only {len(rewards)} logged rewards")
    return SeedResult(seed, sum(rewards[:window]) / window, sum(rewards[-window:]) / window, summary.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps per seed (default 40)")
    parser.add_argument("--lr", type=float, default=3e-2, help="learning rate (default 0.03)")
    parser.add_argument("--window", type=int, default=5, help="steps averaged at each end (default 5)")
    parser.add_argument("--min-gain", type=float, default=0.3, help="required rise of the mean reward (default 0.3)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, sandbox_server(workers=2) as server:
        for seed in args.seeds:
            results.append(learning_run(seed, args.steps, args.window, server.url, Path(tmp), args.lr))
            print(f"seed {seed}: done", file=sys.stderr)
    print(f"\n{args.steps} GRPO steps per seed, 16 one-token completions a step; load {os.getloadavg()[0]:.1f}\n")
    print(f"| seed | mean reward, first {args.window} steps | last {args.window} steps | gain | seconds |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r.seed} | {r.first:.3f} | {r.last:.3f} | {r.gain:+.3f} | {r.seconds:.0f} |")
    ok = all(r.gain >= args.min_gain for r in results)
    print(f"\ntarget: the mean reward rises by >= {args.min_gain} for every seed: {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
