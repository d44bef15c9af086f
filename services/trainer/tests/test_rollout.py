"""The trainer's seam with a tiny model: the default rollout is TRL's own GRPO step, and a custom rollout and
advantage function drive a real optimisation step (their samples, their advantages, with their signs)."""

from __future__ import annotations

import copy
import doctest
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from codegym_trainer import rollout as rollout_module
from codegym_trainer.grpo import CodegymGRPOTrainer
from codegym_trainer.rollout import Rollout, TrainerContext, keyed_advantages, total_reward
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")

PROMPTS = ["print(1)", "x = 1", "def f(a, b):", "import sys"]


def length_reward(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float | None]:
    """A reward with spread and a masked member, so the normalisation and the masking both show."""
    return [None if i == 1 else float(len(c) % 5) for i, c in enumerate(completions)]


def make_trainer(model_dir: Path, out: Path, *, accumulation: int = 1, lr: float = 1e-6, **kwargs: Any) -> Any:
    rows = [{"prompt": p} for p in PROMPTS]
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=1,
        per_device_train_batch_size=4 // accumulation,
        gradient_accumulation_steps=accumulation,
        num_generations=2,
        max_completion_length=6,
        learning_rate=lr,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    return CodegymGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=[length_reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        completions_interval=1,
        **kwargs,
    )


def test_default_rollout_is_trls_grpo_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    trainer = make_trainer(tiny_model_dir, tmp_path)
    trainer.model.train()
    inputs = [{"prompt": p} for p in ("print(1)", "print(1)", "x = 1", "x = 1", "import sys", "import sys")]
    torch.manual_seed(3)
    ours = trainer._generate_and_score_completions(copy.deepcopy(inputs))
    torch.manual_seed(3)
    theirs = GRPOTrainer._generate_and_score_completions(trainer, copy.deepcopy(inputs))
    assert set(ours) == set(theirs)
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "num_items_in_batch"):
        assert torch.equal(ours[key], theirs[key]), key
    assert ours["advantages"].tolist() == pytest.approx(theirs["advantages"].tolist(), abs=1e-4)
    assert ours["advantages"][1] == 0.0 and ours["advantages"].abs().sum() > 0  # masked, and some signal


def test_custom_rollout_and_advantages_drive_a_training_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def rollout(context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout:
        # three samples from four rows: a size TRL's two micro-batches do not divide, as self-play makes
        prompts = [row["prompt"] for row in inputs][:3]
        generation = context.generate(prompts, repeats=1)
        seen["rollout"] = result = Rollout(
            prompts=prompts,
            completions=generation.completions,
            prompt_ids=generation.prompt_ids,
            completion_ids=generation.completion_ids,
            rewards=[1.0, -1.0, 0.5],
            groups=["a", "b", "a"],
            extra={"seat": ["X", "O", "X"]},
            metrics={"custom/metric": 7.0},
        )
        return result

    def advantages(rollout: Rollout, context: TrainerContext) -> list[float]:
        seen["advantage_input"] = rollout
        return [seen["sign"] * 1.0] * len(rollout)

    for sign in (1.0, -1.0):
        seen["sign"] = sign
        out = tmp_path / f"sign{sign:+.0f}"
        trainer = make_trainer(
            tiny_model_dir, out, accumulation=2, lr=1e-2, step_rollout=rollout, step_advantage=advantages
        )
        trainer.train()
        sample = seen["rollout"]
        assert seen["advantage_input"] is sample
        table = [json.loads(line) for line in (out / "completions" / "step_00001.jsonl").read_text().splitlines()]
        assert [row["seat"] for row in table] == ["X", "O", "X"]
        assert [row["advantage"] for row in table] == [sign] * 3
        assert [row["reward"] for row in table] == [1.0, -1.0, 0.5]
        logged = next(row for row in trainer.state.log_history if "custom/metric" in row)
        assert logged["custom/metric"] == 7.0 and logged["reward"] == pytest.approx(0.5 / 3)
        # the policy moved toward its completions when their advantage was positive, away when negative
        before = sequence_logp(AutoModelForCausalLM.from_pretrained(tiny_model_dir), sample)
        after = sequence_logp(trainer.model, sample)
        assert (after - before) * sign > 0, (before, after)


def sequence_logp(model: Any, rollout: Rollout) -> float:
    """The summed log-probability of a rollout's completions given their prompts."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for prompt, completion in zip(rollout.prompt_ids, rollout.completion_ids, strict=True):
            ids = torch.tensor([prompt + completion])
            logits = model(ids).logits[0, len(prompt) - 1 : -1]
            total += float(torch.log_softmax(logits.float(), -1).gather(1, ids[0, len(prompt) :, None]).sum())
    return total


def test_total_reward_and_keyed_advantages() -> None:
    assert total_reward({"a": [1.0, None], "b": [2.0, None]}, [0.5, 1.0]) == [2.5, None]
    # groups by key, wherever their members sit; one scored member alone has no signal
    advantages = keyed_advantages([1.0, 2.0, 3.0, 5.0, 4.0], ["x", "y", "x", "z", "y"], scale=False)
    assert advantages == [-1.0, -1.0, 1.0, 0.0, 1.0]


def test_rollout_columns_must_agree() -> None:
    with pytest.raises(ValueError, match="rewards"):
        Rollout(prompts=["p"], completions=["c"], prompt_ids=[[1]], completion_ids=[[2]], rewards=[], groups=[0])


def test_docstring_examples() -> None:
    failed, attempted = doctest.testmod(rollout_module)
    assert attempted > 0 and failed == 0
