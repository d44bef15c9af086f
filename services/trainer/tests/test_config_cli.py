from __future__ import annotations

from pathlib import Path

import pytest
from codegym_trainer.cli import build_parser, main, parse_config
from codegym_trainer.config import TrainConfig

SEED_FLAGS = [
    "--model",
    "--host",
    "--port",
    "--train-steps",
    "--batch-size",
    "--group-size",
    "--train-temperature",
    "--split",
    "--limit",
    "--difficulty",
    "--sandbox-backend",
    "--sandbox-workers",
    "--python-version",
    "--timeout-per-test",
    "--partial-credit",
    "--concurrency",
    "--learning-rate",
    "--max-completion-length",
    "--eval-interval",
    "--output-dir",
    "--seed",
    "--resume",
    "--sandbox-url",
    "--reward-scheme",
]


def test_help_lists_every_field_and_the_seed_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in SEED_FLAGS:
        assert flag in text, flag
    for name in TrainConfig.model_fields:
        assert "--" + name.replace("_", "-") in text, name


def test_flags_fill_the_config() -> None:
    config = parse_config(
        [
            "--train-steps",
            "7",
            "--partial-credit",
            "--sandbox-url",
            "http://127.0.0.1:1",
            "--sandbox-url",
            "http://127.0.0.1:2",
            "--reward-scheme",
            "execution",
            "--limit",
            "3",
        ]
    )
    assert config.train_steps == 7
    assert config.partial_credit is True
    assert config.sandbox_url == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert config.reward_scheme == "execution"
    assert config.limit == 3


def test_yaml_fills_the_same_fields_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("train_steps: 11\ngroup-size: 8\ntimeout_per_test: 2.5\n")
    config = parse_config(["--config", str(path), "--train-steps", "3"])
    assert (config.train_steps, config.group_size, config.timeout_per_test) == (3, 8, 2.5)


def test_unknown_yaml_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("train_steps: 2\nlearning_rat: 0.1\n")
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown field(s) 'learning_rat'" in err and str(path) in err


def test_bad_value_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("group_size: 1\n")
    assert main(["--config", str(path)]) == 2
    assert "group_size" in capsys.readouterr().err


def test_yaml_must_be_a_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("- 1\n- 2\n")
    assert main(["--config", str(path)]) == 2
    assert "must hold a mapping" in capsys.readouterr().err


def test_environment_fills_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEGYM_TRAINER_TRAIN_STEPS", "13")
    assert parse_config([]).train_steps == 13


def test_demo_config_is_valid() -> None:
    root = Path(__file__).resolve().parents[1]
    config = parse_config(["--config", str(root / "configs" / "cpu-demo.yaml")])
    assert config.train_steps * config.batch_size * config.group_size <= 64  # stays a short run


def test_wandb_without_its_package_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here: the missing-package message cannot be shown")
    assert main(["--wandb-project", "p", "--skip-eval", "--train-steps", "1"]) == 2
    assert "pip install 'codegym-trainer[wandb]'" in capsys.readouterr().err


def test_dataset_help_names_every_dataset_of_the_registry() -> None:
    from codegym_evaluator.tasks.registry import DATASETS

    help_text = TrainConfig.model_fields["dataset"].description or ""
    missing = [name for name in DATASETS if name not in help_text]
    assert not missing, f"--dataset help does not name {missing}"
