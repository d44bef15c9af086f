"""The problems the trainer ships: valid tasks whose reference solutions pass their tests in the sandbox."""

from __future__ import annotations

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task, read_task_file
from codegym_trainer import tasks as trainer_tasks
from codegym_trainer.config import TrainConfig
from codegym_trainer.data import HELDOUT_FILE, TRAIN_FILE
from codegym_trainer.tasks import heldout_tasks, prompt_dataset, training_tasks


def test_training_and_heldout_sets_are_disjoint() -> None:
    train = read_task_file(TRAIN_FILE)
    held = read_task_file(HELDOUT_FILE)
    assert len(train) >= 24 and len(held) >= 10
    assert {t.kind for t in train} == {"call", "stdio"}
    assert not {t.entry_point for t in train if t.entry_point} & {t.entry_point for t in held if t.entry_point}


def test_selection_flags() -> None:
    assert len(training_tasks(TrainConfig(limit=5))) == 5
    medium = training_tasks(TrainConfig(difficulty="medium"))
    assert medium and all(t.difficulty == "medium" for t in medium)
    assert len(heldout_tasks(TrainConfig(eval_limit=3))) == 3


def test_training_never_judges_only_tests_its_prompt_shows(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A task whose prompt shows every test that judges it trains on its dataset's training prompt, or not at all:
    a reward on shown tests pays a lookup table of their answers."""
    asserts = [{"assert_code": f"assert f({i}) == {i}"} for i in range(3)]
    shows_all = {"public_tests": 3, "training_prompt": "f; assert f(0) == 0", "training_public_tests": 1}
    loaded = [
        Task("mbpp-like", "f; three asserts", "assert", asserts, "f", metadata=shows_all),
        Task(
            "examples-only",
            "two examples",
            "stdio",
            [{"stdin": "1", "expected_stdout": "1"}] * 2,
            metadata={"public_tests": 2},
        ),
        Task("hidden", "p", "stdio", [{"stdin": "1", "expected_stdout": "1"}] * 2),
    ]
    monkeypatch.setattr(trainer_tasks, "_load", lambda *args: loaded)
    train = training_tasks(TrainConfig(dataset="mbpp"))
    assert [t.task_id for t in train] == ["mbpp-like", "hidden"]
    assert train[0].prompt == "f; assert f(0) == 0" and train[0].tests == asserts and train[1] is loaded[2]
    assert "1 of 3 tasks left out of training" in caplog.text


def test_code_repair_leaves_out_a_task_its_feedback_would_show_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement that prints every test but the first, which the repair's feedback shows (``--public-tests``):
    with both, a lookup table of the answers passes. Plain code tasks show no test, and train on it."""
    prompt = "Print 2*n.\nExample\nInput:\n3\nOutput:\n6\n"
    tests = [{"stdin": "7\n", "expected_stdout": "14\n"}, {"stdin": "3\n", "expected_stdout": "6\n"}]
    loaded = [Task("double", prompt, "stdio", tests), Task("hidden", "p", "stdio", tests)]
    monkeypatch.setattr(trainer_tasks, "_load", lambda *args: loaded)
    assert [t.task_id for t in training_tasks(TrainConfig(dataset="apps"))] == ["double", "hidden"]
    for tools in (False, True):
        repair = TrainConfig(dataset="apps", task="code-repair", tools=tools)
        assert [t.task_id for t in training_tasks(repair)] == ["hidden"]
    assert len(training_tasks(TrainConfig(dataset="apps", task="code-repair", public_tests=0))) == 2


def test_prompt_dataset_has_the_task_column() -> None:
    tasks = training_tasks(TrainConfig(limit=3))
    ds = prompt_dataset(tasks, chat=True)
    assert ds.column_names == ["prompt", "task_id"]
    assert ds[0]["prompt"][-1]["role"] == "user"
    assert isinstance(prompt_dataset(tasks, chat=False)[0]["prompt"], str)


@pytest.mark.anyio
async def test_every_reference_solution_passes(sandbox_app: httpx.ASGITransport) -> None:
    tasks = read_task_file(TRAIN_FILE) + read_task_file(HELDOUT_FILE)
    async with Scorer("http://sandbox", transport=sandbox_app) as scorer:
        for task in tasks:
            good, bad = await scorer.score_group(task, [task.metadata["solution"], "pass"], extract=False)
            assert good.verdict == "AC", (task.task_id, good)
            assert bad.verdict != "AC", task.task_id  # the tests can fail
