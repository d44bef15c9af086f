"""The problems the trainer ships: valid tasks whose reference solutions pass their tests in the sandbox."""

from __future__ import annotations

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import read_task_file
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
