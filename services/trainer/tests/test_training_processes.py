"""Runs of two training processes (``torchrun``, gloo on the CPU), as on a machine with two GPUs.

Every process trains; the first alone logs, evaluates, prints and writes the run's files (two writers would
log every row twice and race on the same files). In SPIRAL each process plays its own games, and the role
baselines must take in every process's returns, or each would train on advantages from half of the games
(and the two would drift apart). The completions table gathers every process's samples (a game names its
process: ``step/process/index``), so the baselines logged at each step can be computed again here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from codegym_evaluator.servers import LoopbackServer

STEPS = 2
ALPHA = 0.95


def launch(model: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``codegym-train`` in two processes on this machine, as ``torchrun --nproc-per-node 2`` starts it."""
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "codegym_trainer.cli",
        "--model",
        str(model),
        "--train-steps",
        str(STEPS),
        "--save-steps",
        "1",
        "--completions-interval",
        "1",
        "--learning-rate",
        "1e-3",
        "--threads",
        "1",
        "--no-progress",
        "--output-dir",
        str(out),
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert done.stdout.count("codegym-train summary") == 1, done.stdout  # the first process alone prints
    return done


def logged(out: Path, kind: str) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` of one kind (train, eval)."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


def test_a_grpo_run_of_two_processes_writes_one_set_of_outputs(
    tiny_model_dir: Path, tmp_path: Path, sandbox_process: LoopbackServer
) -> None:
    out = tmp_path / "run"
    launch(
        tiny_model_dir,
        out,
        "--batch-size",
        "2",
        "--group-size",
        "2",
        "--max-completion-length",
        "8",
        "--eval-limit",
        "2",
        "--eval-max-new-tokens",
        "8",
        "--sandbox-url",
        sandbox_process.url,
    )
    assert [r["step"] for r in logged(out, "train")] == list(range(1, STEPS + 1))
    assert [r["step"] for r in logged(out, "eval")] == [0, STEPS]  # held-out pass@1 before and after, once each
    for step in range(1, STEPS + 1):
        table = (out / "completions" / f"step_{step:05d}.jsonl").read_text().splitlines()
        assert len(table) == 2 * 2 * 2  # batch x group, from each of the two processes
    assert {"model.safetensors", "tokenizer.json"} <= {p.name for p in (out / "final").iterdir()}
    assert json.loads((out / "summary.json").read_text())["steps"] == STEPS


def returns_by_role(table: Path) -> dict[str, dict[str, float]]:
    """role -> game -> that role's return in the game (every turn of a role in a game has the same one)."""
    out: dict[str, dict[str, float]] = {}
    for line in table.read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row["role"], {})[row["episode"]] = row["reward"]
    return out


@pytest.mark.parametrize("rae", [True, False], ids=["rae", "no-rae"])
def test_spiral_in_two_processes_keeps_one_set_of_baselines(tiny_model_dir: Path, tmp_path: Path, rae: bool) -> None:
    out = tmp_path / "run"
    launch(
        tiny_model_dir,
        out,
        "--task",
        "spiral",
        "--game",
        "tictactoe",
        "--selfplay-games-per-step",
        "3",
        "--max-completion-length",
        "6",
        "--selfplay-eval-games",
        "2",
        "--selfplay-eval-every",
        "1",
        *([] if rae else ["--no-rae"]),
    )
    assert [r["step"] for r in logged(out, "train")] == list(range(1, STEPS + 1))
    assert [r["step"] for r in logged(out, "eval")] == list(range(STEPS + 1))  # before, and after every step
    train = {r["step"]: r for r in logged(out, "train")}
    baselines: dict[str, float] = {}
    for step in range(1, STEPS + 1):
        table = out / "completions" / f"step_{step:05d}.jsonl"
        played = returns_by_role(table)
        processes = {game.split("/")[1] for games in played.values() for game in games}
        assert processes == {"0", "1"}, f"step {step}: the table holds the games of processes {sorted(processes)}"
        # each turn's advantage: its return less its role's baseline as the step began (RAE), or the return
        for line in table.read_text().splitlines():
            row = json.loads(line)
            expected = row["reward"] - (baselines.get(row["role"], 0.0) if rae else 0.0)
            assert row["advantage"] == pytest.approx(expected), row
        for role, games in played.items():
            keep = ALPHA ** len(games)
            baselines[role] = keep * baselines.get(role, 0.0) + (1 - keep) * sum(games.values()) / len(games)
        for role, value in baselines.items():
            seen = train[step][f"rae/baseline/tictactoe/{role}"]
            assert seen == pytest.approx(value), f"step {step}, {role}: logged {seen}, both processes' games {value}"

    saved = json.loads((out / f"checkpoint-{STEPS}" / "rae_baselines.json").read_text())
    assert {role: value for _, role, value in saved["values"]} == pytest.approx(baselines)
