"""Samples files: clear errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from codegym_evaluator.samples import SamplesError, read_samples

IDS = ["HumanEval/0", "HumanEval/1"]


def test_completions_by_task_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"task_id": "HumanEval/1", "completion": "a"}\n\n'
        '{"task_id": "HumanEval/0", "completion": "b"}\n{"task_id": "HumanEval/1", "completion": "c", "x": 1}\n'
    )
    assert read_samples(path, IDS) == {"HumanEval/1": ["a", "c"], "HumanEval/0": ["b"]}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"task_id": "HumanEval/0", "completion": "x"', r"s.jsonl:2: not valid JSON"),
        ('{"task_id": "HumanEval/0"}', r"s.jsonl:2: missing field completion"),
        ("{}", r"s.jsonl:2: missing fields task_id, completion"),
        ('{"task_id": "HumanEval/999", "completion": "x"}', r"s.jsonl:2: unknown task_id 'HumanEval/999'"),
        ('{"task_id": 3, "completion": "x"}', r"s.jsonl:2: task_id and completion must be strings"),
        ('["HumanEval/0", "x"]', r"s.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"task_id": "HumanEval/0", "completion": "ok"}\n' + line + "\n")
    with pytest.raises(SamplesError, match=message):
        read_samples(path, IDS)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(SamplesError, match="no such samples file"):
        read_samples(tmp_path / "nope.jsonl", IDS)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(SamplesError, match="no samples"):
        read_samples(tmp_path / "empty.jsonl", IDS)
