"""``codegym-data``: the help, --list, errors, and a real run against the session's sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from codegym_data.cli import main
from codegym_data.transform import TRANSFORMATIONS
from codegym_evaluator.tasks import load_tasks


def test_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["transform", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--dataset",
        "--transform",
        "--seed",
        "--out",
        "--sandbox-url",
        "--limit",
        "--path",
        "--list",
        "--include-original",
        "CODEGYM_DATA_",
    ):
        assert flag in out


def test_list_shows_every_transformation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", "--list"]) == 0
    out = capsys.readouterr().out
    for name, cls in TRANSFORMATIONS.items():
        assert f"{name}  " in out and cls.summary in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["transform", "--transform", "rename,nope"], "unknown transformation 'nope'"),
        (["transform", "--dataset", "nope"], "unknown dataset 'nope'"),
        (["transform", "--limit", "0"], "limit: Input should be greater than or equal to 1"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--sandbox-url", "http://127.0.0.1:9"]) == 2
    assert message in capsys.readouterr().err


def test_a_run_writes_the_task_file_and_the_report(
    sandbox_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEGYM_DATA_SEED", "5")  # settings also come from the environment
    argv = [
        "transform",
        "--dataset",
        "humaneval",
        "--limit",
        "4",
        "--transform",
        "for_to_while,rename+dead_code",
        "--sandbox-url",
        sandbox_url,
        "--out",
        str(tmp_path),
        "--include-original",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| for_to_while | 4 | 0 | 1 | 3 | 0 | 3 | 0 | 100.0% (3/3) |" in out
    assert "| rename+dead_code | 4 | 0 | 0 | 4 | 0 | 4 | 0 | 100.0% (4/4) |" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["seed"] == 5 and report["rows"] == 4
    assert [t["transformation"] for t in report["transformations"]] == ["for_to_while", "rename+dead_code"]
    tasks = load_tasks("jsonl", path=tmp_path / "tasks.jsonl")
    ids = [t.task_id for t in tasks]
    assert ids[:4] == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "HumanEval/3"]  # --include-original
    assert len(ids) == 4 + 3 + 4 and "HumanEval/2#for_to_while" not in ids and "HumanEval/2#rename+dead_code" in ids
    assert tasks[4].metadata["transformed_from"]["seed"] == 5
    assert "still passing" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "dropped.jsonl").read_text() == ""


def test_a_sandbox_that_cannot_be_reached_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "transform",
        "--limit",
        "2",
        "--transform",
        "dead_code",
        "--sandbox-url",
        "http://127.0.0.1:9",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 1
    assert "the sandbox could not judge 2 rewrites" in capsys.readouterr().err
    assert load_tasks("jsonl", path=tmp_path / "tasks.jsonl") == []
