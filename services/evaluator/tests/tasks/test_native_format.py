"""codegym's own task format and load_tasks' handling of local paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from codegym_evaluator.tasks import DatasetError, Task, load_tasks, read_task_file, write_task_file

TASKS = [
    Task("a", "sum", "stdio", [{"stdin": "1 2", "expected_stdout": "3"}], difficulty="easy"),
    Task("b", "sq", "call", [{"call": [2], "expected": 4}], entry_point="sq", difficulty="hard", metadata={"x": 1}),
    Task("c", "inc", "assert", [{"assert_code": "assert inc(1) == 2"}], entry_point="inc"),
]


def test_round_trip_and_filters(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    write_task_file(TASKS, path)
    assert read_task_file(path) == TASKS
    assert load_tasks("jsonl", path=path) == TASKS
    assert load_tasks("jsonl", path=path, difficulty="hard") == [TASKS[1]]
    assert load_tasks("jsonl", path=path, limit=2) == TASKS[:2]
    # any .jsonl holding tasks is read as tasks, whatever dataset name came with it
    assert load_tasks("humaneval", path=path) == TASKS


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"task_id": "x", "prompt": "p", "kind": "stdio"', "tasks.jsonl:2: not valid JSON"),
        ('{"task_id": "x", "prompt": "p", "kind": "stdio"}', "tasks.jsonl:2: missing task fields ['tests']"),
        ('{"task_id": "x", "prompt": "p", "kind": "io", "tests": [{}]}', "tasks.jsonl:2: kind must be one of"),
        ('{"task_id": "x", "prompt": "p", "kind": "stdio", "tests": [], "oops": 1}', "unknown task fields ['oops']"),
        ('{"task_id": "x", "prompt": "p", "kind": "stdio", "tests": []}', "tasks.jsonl:2: task 'x' has no tests"),
        ("[1, 2]", "tasks.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASKS[0].to_dict()) + "\n" + line + "\n")
    with pytest.raises(DatasetError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_tasks("jsonl", path=path)


def test_unknown_dataset_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"unknown dataset 'nope'; known: .*humaneval"):
        load_tasks("nope")
    with pytest.raises(DatasetError, match="needs a path"):
        load_tasks("jsonl")
    with pytest.raises(DatasetError, match="no such file"):
        load_tasks("jsonl", path=tmp_path / "missing.jsonl")
