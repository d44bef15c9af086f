"""Where a dataset's files come from: the hub root, a local copy laid out as the hub, and what a failure says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from codegym_evaluator.tasks import DatasetError, load_tasks
from codegym_evaluator.tasks.hub import HF_DATASETS, ROOT_ENV, hub_root

HUB = Path(__file__).parent.parent / "fixtures" / "hub"


def test_the_root_is_the_argument_else_the_environment_else_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ROOT_ENV, raising=False)
    assert hub_root() == HF_DATASETS == "hf://datasets"
    monkeypatch.setenv(ROOT_ENV, str(HUB))
    assert hub_root() == str(HUB) and hub_root("/elsewhere") == "/elsewhere"
    # what the environment names is read as the hub would be: `--dataset apps` with no path, as the CLI asks
    assert [t.task_id for t in load_tasks("apps", limit=2)] == ["APPS/4001", "APPS/2"]
    assert [t.task_id for t in load_tasks("leetcode", split="train")] == ["LeetCode/add-two-integers"]


def test_an_unknown_split_or_version_lists_those_there_are() -> None:
    with pytest.raises(DatasetError, match=r"codeparrot/apps has no split 'validation'; its splits: train, test"):
        load_tasks("apps", split="validation", hub_root=HUB)
    with pytest.raises(DatasetError, match=r"deepmind/code_contests has no split 'validation'.*train, valid, test"):
        load_tasks("code_contests", split="validation", hub_root=HUB)
    with pytest.raises(DatasetError, match=r"no version 'release_latest_v2'; use release_latest, release_vN"):
        load_tasks("livecodebench", split="release_latest_v2", hub_root=HUB)
    with pytest.raises(DatasetError, match=r"no version 'v3_v2'"):
        load_tasks("livecodebench", split="v3_v2", hub_root=HUB)


def test_a_missing_file_names_the_pattern_and_where_it_looked() -> None:
    lcb = HUB / "livecodebench" / "code_generation_lite"
    with pytest.raises(DatasetError, match=rf"no file of {lcb} matches 'test4.jsonl' \(split 'release_v4'"):
        load_tasks("livecodebench", split="release_v4", hub_root=HUB)  # the copy holds releases 1 to 3
    with pytest.raises(DatasetError, match=r"matches 'sanitized/train-\*.parquet' \(split 'train' of google-"):
        load_tasks("mbpp-sanitized", split="train", hub_root=HUB)


def test_a_root_without_the_repository_shows_the_layout_it_wants(tmp_path: Path) -> None:
    want = rf"{tmp_path}/BAAI/TACO: no such directory; the hub root {tmp_path} \({ROOT_ENV}\) must hold"
    with pytest.raises(
        DatasetError, match=rf"{want} the dataset's repository as on the hub: {tmp_path}/BAAI/TACO/ALL/"
    ):
        load_tasks("taco", hub_root=tmp_path)


def test_without_huggingface_hub_the_error_says_how_to_get_it_or_do_without(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ROOT_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if it were not installed
    with pytest.raises(
        DatasetError, match=rf"needs huggingface_hub: pip install 'codegym-evaluator\[hub\]'.*{ROOT_ENV}"
    ):
        load_tasks("mbpp")


def test_offline_with_nothing_cached_says_what_was_tried_and_how_to_use_a_copy(tmp_path: Path) -> None:
    # A fresh interpreter, so that huggingface_hub reads HF_HUB_OFFLINE and its cache location as it starts.
    env = {k: v for k, v in os.environ.items() if k != ROOT_ENV and not k.startswith("HF_")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    code = "from codegym_evaluator.tasks import load_tasks\nload_tasks('livecodebench', split='release_v2')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("codegym_evaluator.tasks.sources.DatasetError: could not download ")
    tried = (
        "hf://datasets/livecodebench/code_generation_lite/test.jsonl, hf://datasets/livecodebench/code_generation_lite"
    )
    assert f"{tried}/test2.jsonl (LocalEntryNotFoundError: " in error
    assert f"and set {ROOT_ENV}=DIR, or pass a file with --path" in error
    assert "hf download livecodebench/code_generation_lite --repo-type dataset" in error


def test_a_path_still_reads_one_file_of_the_repository() -> None:
    tasks = load_tasks("taco", path=HUB / "BAAI" / "TACO" / "ALL" / "test-00000-of-00001.parquet")
    assert [t.task_id for t in tasks] == ["TACO/0", "TACO/1", "TACO/2"]
