"""The evaluator's TRL environment (``codegym_evaluator.trl_env``) in TRL's own GRPOTrainer: one real step.

A tiny model whose chat template calls tools (Qwen2.5's, which TRL knows how to parse), taught on the spot to
answer with one ``run_tests`` call, a dataset with open-r1's ``verification_info`` column, and a real sandbox
on loopback: TRL must reset an environment per rollout with its row, call the tool, and take the reward from
``get_reward``, the program judged on all the row's tests.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from codegym_evaluator.servers import LoopbackServer
from codegym_evaluator.trl_env import CodeEnvironment
from datasets import Dataset
from tiny_model import CORPUS
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
PROGRAM = "a, b = map(int, input().split())\nprint(a + b)"
CALL = json.dumps({"name": "run_tests", "arguments": {"code": PROGRAM}})
ANSWER = f"<tool_call>\n{CALL}\n</tool_call><|im_end|>"
CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]  # the second one hidden
PROMPT = [{"role": "user", "content": "Add two numbers."}]
ROW = {"prompt": PROMPT, "verification_info": {"language": "python", "test_cases": CASES}}


class Recorded(CodeEnvironment):
    """The environment, with what TRL asked of it written down."""

    calls: ClassVar[list[tuple[str, Any]]] = []

    def reset(self, **row: Any) -> str | None:
        Recorded.calls.append(("reset", sorted(ROW)))
        return super().reset(**row)

    async def run_tests(self, code: str) -> str:
        answer = await super().run_tests(code)
        Recorded.calls.append(("run_tests", answer))
        return answer

    async def get_reward(self) -> float | None:
        reward = await super().get_reward()
        Recorded.calls.append(("get_reward", reward))
        return reward


def tool_calling_model(directory: Path, environment: CodeEnvironment | None = None, **row: Any) -> Path:
    """A 2-layer Llama with a BPE tokenizer and Qwen2.5's chat template, trained to answer ``ANSWER`` to ``row``'s
    prompt (``ROW``'s by default) as TRL renders it with ``environment``'s tools and the text its reset gives."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([*CORPUS, CALL, PROGRAM] * 5, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe, pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tokenizer.chat_template = resources.files("trl").joinpath("chat_templates/qwen2_5.jinja").read_text()
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    # The prompt as TRL renders it: the tools' schemas, and the public tests reset appends to the last message.
    env = environment or CodeEnvironment("http://127.0.0.1:9", public_tests=1)
    row = row or ROW
    shown = env.reset(**row)
    prompt_messages = row["prompt"]
    messages = [
        *prompt_messages[:-1],
        {**prompt_messages[-1], "content": prompt_messages[-1]["content"] + (shown or "")},
    ]
    tools = [env.run_python, env.run_tests, env.submit]
    prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(str(prompt) + ANSWER, return_tensors="pt").input_ids
    start = len(tokenizer(str(prompt)).input_ids)
    labels = ids.clone()
    labels[:, :start] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):  # until it answers the call token for token
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    model.save_pretrained(directory)
    return directory


# transformers renamed gradient checkpointing and TRL still reads the old name (as the trainer's run says).
@pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")
@pytest.mark.filterwarnings("ignore:You are using 'environment_factory'")
def test_grpo_trainer_runs_the_environment_for_a_step(sandbox_process: LoopbackServer, tmp_path: Path) -> None:
    path = tool_calling_model(tmp_path / "model")
    Recorded.calls = []
    dataset = Dataset.from_list([ROW] * 4)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=96,
        max_tool_calling_iterations=1,
        temperature=0.05,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        args=args,
        train_dataset=dataset,
        environment_factory=lambda: Recorded(sandbox_process.url, public_tests=1, timeout_s=5.0),
    )
    trainer.train()
    kinds = [kind for kind, _ in Recorded.calls]
    assert kinds.count("reset") == 2 and ("reset", sorted(ROW)) in Recorded.calls
    answers = [value for kind, value in Recorded.calls if kind == "run_tests"]
    assert answers and all(a == "All 1 tests passed.\nTest 1: passed" for a in answers)
    rewards = [value for kind, value in Recorded.calls if kind == "get_reward"]
    assert rewards == [1.0, 1.0]  # the program passes the hidden test too
    logged = next(h for h in trainer.state.log_history if "rewards/Recorded/mean" in h)
    assert logged["rewards/Recorded/mean"] == 1.0
