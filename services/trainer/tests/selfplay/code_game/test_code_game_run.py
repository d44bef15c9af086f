"""``codegym-train --task code-game`` end to end with a tiny model and a sandbox the run starts: its metrics,
evaluations, files and checkpoints, and a resume that goes on from the saved role baselines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from codegym_trainer.cli import main, parse_config
from codegym_trainer.platform import Platform
from codegym_trainer.selfplay.code_game.evaluation import ACCURACY
from codegym_trainer.selfplay.code_game.output_prediction import load_output_problems
from codegym_trainer.selfplay.code_game.rounds import OpponentPredictor
from codegym_trainer.selfplay.code_game.run import predictor_of, step_split
from codegym_trainer.selfplay.training import BASELINES_FILE

pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")

WRITER_KEY = "rae/baseline/code-game/writer"


def argv(model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--task",
        "code-game",
        "--model",
        str(model),
        "--output-dir",
        str(out),
        "--train-steps",
        "2",
        "--code-game-programs-per-step",
        "3",
        "--predictions-per-program",
        "2",
        "--eval-interval",
        "1",
        "--eval-max-new-tokens",
        "8",
        "--max-completion-length",
        "8",
        "--sandbox-workers",
        "2",
        "--save-steps",
        "1",
        "--completions-interval",
        "1",
        "--no-progress",
        "--threads",
        "1",
        *extra,
    ]


def rows(out: Path, kind: str) -> list[dict[str, Any]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if row["kind"] == kind]


def test_a_code_game_run_logs_the_game_and_resumes_from_its_baselines(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    monkeypatch.setenv("COLUMNS", "200")  # the plain console's width: a progress line on one line
    assert main(argv(tiny_model_dir, out)) == 0

    # the plain console's progress lines: the game's own numbers each step, the output accuracy at each evaluation
    lines = capsys.readouterr().out.splitlines()
    number = r"\d+\.\d+"
    step_line = re.compile(
        rf"step (\d)/2  reward -1\.50  writer wins 0%  predicted 0%  invalid 100%  chars 0  "
        rf"gen s {number}  optim s {number}"
    )
    assert [m.group(1) for m in map(step_line.fullmatch, lines) if m] == ["1", "2"], lines
    total = len(load_output_problems())
    eval_line = re.compile(rf"output accuracy at step (\d): {number} \((\d+) of {total} programs\)")
    assert [m.group(1) for m in map(eval_line.fullmatch, lines) if m] == ["0", "1", "2"], lines

    train = rows(out, "train")
    assert [row["step"] for row in train] == [1, 2]
    for row in train:
        for key in (
            "code_game/writer_win_rate",
            "code_game/predictor_accuracy",
            "code_game/invalid_rate",
            "code_game/nondeterministic_rate",
            "code_game/program_chars",
            WRITER_KEY,
        ):
            assert key in row, key
        # an untrained tiny model writes no program: every writer pays the invalid penalty
        assert row["code_game/invalid_rate"] == 1.0 and row["reward"] == -1.5
    # three writers a step at -1.5, from a baseline of 0: b <- 0.95**3 * b + (1 - 0.95**3) * -1.5
    b1 = (1 - 0.95**3) * -1.5
    b2 = 0.95**3 * b1 + (1 - 0.95**3) * -1.5
    assert [row[WRITER_KEY] for row in train] == pytest.approx([b1, b2])

    evals = rows(out, "eval")
    assert [row["step"] for row in evals] == [0, 1, 2] and all(ACCURACY in row for row in evals)
    answers = (out / "code_game_eval" / "step_00002.jsonl").read_text().splitlines()
    assert len(answers) == len(load_output_problems())
    table = [json.loads(line) for line in (out / "completions" / "step_00002.jsonl").read_text().splitlines()]
    assert [(row["role"], row["outcome"], row["advantage"]) for row in table] == [
        ("writer", "unparsable", pytest.approx(-1.5 - b1))
    ] * 3
    saved = json.loads((out / "checkpoint-2" / BASELINES_FILE).read_text())
    assert saved["values"] == [["code-game", "writer", pytest.approx(b2)]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "code-game" and summary["steps"] == 2
    assert [p["step"] for p in summary["output_prediction"]] == [0, 1, 2]

    # one more step from the last checkpoint starts from the saved baseline, not from 0
    assert main([*argv(tiny_model_dir, out), "--train-steps", "3", "--resume", "latest"]) == 0
    third = rows(out, "train")[-1]
    assert third["step"] == 3
    assert third[WRITER_KEY] == pytest.approx(0.95**3 * b2 + (1 - 0.95**3) * -1.5)


def test_the_flags_of_the_game() -> None:
    config = parse_config(
        [
            "--task",
            "code-game",
            "--predictor",
            "http://opponent:8000/v1",
            "--predictor-model",
            "m",
            "--predictor-api",
            "completion",
            "--predictions-per-program",
            "3",
            "--code-game-programs-per-step",
            "5",
        ]
    )
    opponent = predictor_of(config)
    assert isinstance(opponent, OpponentPredictor)
    assert (opponent.base_url, opponent.model, opponent.api) == ("http://opponent:8000/v1", "m", "completion")
    assert config.predictions_per_program == 3 and config.code_game_programs_per_step == 5
    assert predictor_of(parse_config(["--task", "code-game"])) is None  # self-play by default

    cpu = Platform("cpu", "cpu", 0.0, 2, "fp32", False, True, False, "server", 1)
    # on the CPU: two rows a pass, and enough passes for about 16 samples each (5 writers + 5 x 3 predictors)
    self_play = parse_config(
        ["--task", "code-game", "--code-game-programs-per-step", "5", "--predictions-per-program", "3"]
    )
    assert step_split(self_play, cpu) == (2, 2)
    assert step_split(config, cpu) == (2, 1)  # against an opponent only the 5 writers are samples
