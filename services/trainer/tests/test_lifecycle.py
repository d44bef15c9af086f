"""The run's lifecycle, the same for every task: its start, the checkpoint it resumes from, its config.yaml."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from codegym_trainer import lifecycle
from codegym_trainer.config import ConfigError, TrainConfig

TASKS = ["code", "spiral", "code-game"]


@pytest.mark.parametrize("task", TASKS)
def test_every_task_refuses_wandb_without_its_package(task: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without_wandb(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "wandb" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_wandb)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # put back whatever start sets
    config = TrainConfig(task=task, wandb_project="p", offline="on")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pip install 'codegym-trainer\[wandb\]'"):
        lifecycle.start(config)


@pytest.mark.parametrize("task", TASKS)
def test_every_task_points_wandb_at_its_run(task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def with_wandb(name: str, *args: Any, **kwargs: Any) -> Any:
        return object() if name == "wandb" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", with_wandb)
    for name in ("WANDB_PROJECT", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(lifecycle.torch, "set_num_threads", lambda n: None)  # leave this process's threads be
    config = TrainConfig(task=task, wandb_project="proj", output_dir=tmp_path, offline="on")  # type: ignore[arg-type]
    started = lifecycle.start(config)
    assert started.resume is None and started.config is config
    assert (os.environ["WANDB_PROJECT"], os.environ["WANDB_DIR"]) == ("proj", str(tmp_path))


def test_resume_names_a_checkpoint(tmp_path: Path) -> None:
    assert lifecycle.resume_path(TrainConfig(output_dir=tmp_path)) is None
    with pytest.raises(ConfigError, match="no checkpoint-"):
        lifecycle.resume_path(TrainConfig(output_dir=tmp_path, resume="latest"))
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-10").mkdir()
    assert lifecycle.resume_path(TrainConfig(output_dir=tmp_path, resume="latest")) == str(tmp_path / "checkpoint-10")
    with pytest.raises(ConfigError, match="no such checkpoint directory"):
        lifecycle.resume_path(TrainConfig(output_dir=tmp_path, resume=str(tmp_path / "missing")))


def test_config_yaml_reads_back_as_the_same_config(tmp_path: Path) -> None:
    config = TrainConfig(task="spiral", game="kuhn_poker", train_steps=7, output_dir=tmp_path)
    assert TrainConfig(**yaml.safe_load(lifecycle.config_yaml(config))) == config
