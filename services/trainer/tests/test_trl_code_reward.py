"""The evaluator's TRL reward (``codegym_evaluator.trl_reward``) in TRL's own GRPOTrainer: one real step.

A tiny model, a dataset with open-r1's ``verification_info`` column, and a real sandbox on loopback: TRL
must call the reward with its columns and log it, in the sync and the async form. What the tiny model
writes is not code, so the rewards are 0.0: what this checks is that TRL and the reward fit together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from codegym_evaluator.servers import LoopbackServer
from codegym_evaluator.trl_reward import AsyncCodeReward, CodeReward
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

INFO = {"language": "python", "test_cases": [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"}]}


# transformers renamed gradient checkpointing and TRL still reads the old name (as the trainer's run says).
@pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")
@pytest.mark.parametrize("form", [CodeReward, AsyncCodeReward])
def test_grpo_trainer_calls_the_reward_with_the_dataset_columns(
    form: type[CodeReward] | type[AsyncCodeReward],
    tiny_model_dir: Path,
    sandbox_process: LoopbackServer,
    tmp_path: Path,
) -> None:
    calls: list[dict[str, Any]] = []
    reward = form(sandbox_process.url, timeout_s=2.0)
    inner = reward.__call__

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return inner(*args, **kwargs)

    if form is CodeReward:

        def observed(*args: Any, **kwargs: Any) -> Any:
            return spy(*args, **kwargs)
    else:

        async def observed(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return await spy(*args, **kwargs)

    observed.__name__ = reward.__name__

    dataset = Dataset.from_list([{"prompt": "Add two numbers:", "verification_info": INFO}] * 4)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
        reward_funcs=[observed],
        args=args,
        train_dataset=dataset,
    )
    trainer.train()
    assert calls and all(c["verification_info"] == [INFO] * len(c["completions"]) for c in calls)
    logged = [row for row in trainer.state.log_history if "rewards/code_reward/mean" in row]
    assert logged and logged[0]["rewards/code_reward/mean"] == 0.0
