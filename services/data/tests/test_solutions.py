"""Reference solutions of the task library's rows: the program to transform, and the names to keep."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from codegym_data import solutions
from codegym_evaluator.tasks import DATASETS, Task, load_tasks

HUB = Path(__file__).parents[2] / "evaluator" / "tests" / "fixtures" / "hub"


def test_humaneval_is_prompt_and_body_as_one_program() -> None:
    task = load_tasks("humaneval", limit=1)[0]
    ref = solutions.reference(task)
    assert ref is not None and ref.completion == task.metadata["canonical_solution"]
    assert ref.source == task.prompt + task.metadata["canonical_solution"]
    assert {"has_close_elements", "check", "candidate"} <= ref.keep


@pytest.mark.parametrize("dataset", sorted(set(DATASETS) - {"jsonl", "humaneval"}))
def test_each_dataset_has_its_reference_as_a_whole_program(dataset: str) -> None:
    for task in load_tasks(dataset, hub_root=HUB):
        ref = solutions.reference(task)
        if dataset == "livecodebench":
            assert ref is None  # LiveCodeBench rows carry no solution
            continue
        assert ref is not None and ref.source == ref.completion, task.task_id
        ast.parse(ref.source)
        if task.entry_point:
            assert task.entry_point in ref.keep


def _task(solution: object, **fields: object) -> Task:
    base: dict[str, object] = {
        "task_id": "t/1",
        "prompt": "p",
        "kind": "stdio",
        "tests": [{"stdin": "", "expected_stdout": ""}],
    }
    return Task(**{**base, **fields, "metadata": {"canonical_solution": solution}})  # type: ignore[arg-type]


def test_rows_without_a_usable_python_solution() -> None:
    assert solutions.reference(_task("")) is None
    assert solutions.reference(_task(None)) is None
    assert solutions.reference(_task("def f(:\n")) is None
    assert solutions.reference(_task("int main() {}", language="cpp")) is None
    stdio = solutions.reference(_task("print(input())"))
    assert stdio is not None and stdio.keep == frozenset()  # stdio tests are data, not code


def test_a_transformed_row() -> None:
    task = _task("print(1)")
    new = solutions.transformed(task, "print(1)\n", "dead_code", 7)
    assert new.task_id == "t/1#dead_code" and new.metadata["canonical_solution"] == "print(1)\n"
    assert new.metadata["transformed_from"] == {"task_id": "t/1", "transformation": "dead_code", "seed": 7}
    assert task.metadata == {"canonical_solution": "print(1)"}
