"""Held-out answers: the greedy one first, then seeded samples that leave the training's random stream alone."""

from __future__ import annotations

from pathlib import Path

import torch
from codegym_evaluator.tasks import Task
from codegym_trainer.evaluation import generate_answers
from transformers import AutoModelForCausalLM, AutoTokenizer


def test_samples_are_reproducible_and_leave_the_random_stream_alone(tiny_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    tasks = [
        Task(
            task_id=f"t{i}",
            prompt=f"Write a Python program that prints {i}.",
            kind="stdio",
            tests=[{"stdin": "", "expected_stdout": f"{i}\n"}],
        )
        for i in range(3)
    ]

    def answers(seed: int) -> dict[str, list[str]]:
        return generate_answers(
            model, tokenizer, tasks, chat=True, max_new_tokens=6, batch_size=2, samples=3, temperature=1.5, seed=seed
        )

    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first = answers(0)
    assert torch.equal(torch.random.get_rng_state(), state)  # the training's stream is where it was
    assert sorted(first) == ["t0", "t1", "t2"] and all(len(v) == 4 for v in first.values())
    assert answers(0) == first  # same policy, same seed: same answers
    again = answers(7)
    assert [v[0] for v in again.values()] == [v[0] for v in first.values()]  # greedy does not depend on the seed
    assert again != first  # the samples do


def test_a_base_policys_answers_are_the_block_its_prompt_opened(tiny_model_dir: Path) -> None:
    # a policy without a chat template continues a prompt that ends in an open fence: each answer is judged as
    # that block (``prompts.continued_answer``), as the reward and codegym-eval read it
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    task = Task("t", "Print 1.", "stdio", [{"stdin": "", "expected_stdout": "1\n"}])
    answers = generate_answers(model, tokenizer, [task], chat=False, max_new_tokens=6, batch_size=1, samples=2)
    assert len(answers["t"]) == 3 and all(a.startswith("```python\n") for a in answers["t"])
