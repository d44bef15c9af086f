"""Code repair (``--task code-repair``): feedback reaches the next turn, only the policy's tokens train, the
reward judges all tests, and a real two-step run on the tiny model logs what the feedback did."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from codegym_evaluator.servers import LoopbackServer, free_port
from codegym_evaluator.tasks import PUBLIC_TESTS, Task
from codegym_trainer.grpo import CodegymGRPOTrainer
from codegym_trainer.repair import CodeRepairRollout, public_task
from codegym_trainer.rollout import Generation
from codegym_trainer.run import run
from codegym_trainer.tasks import prompt_of
from recording_sandbox import RecordingSandbox
from rich.console import Console
from test_train_tiny import tiny_config, train_rows
from transformers import AutoTokenizer

# The request after the feedback, as the evaluator's --turns words it (prompts.repair_request): one wording.
ASK_AGAIN = "Fix the program. Put the complete corrected code in one ```python block."

ADD = Task(
    task_id="add",
    prompt="Write add(a, b).",
    kind="call",
    entry_point="add",
    tests=[{"call": [1, 2], "expected": 3}, {"call": [5, 5], "expected": 10}, {"call": [0, 4], "expected": 4}],
)
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
PUBLIC_ONLY = "```python\ndef add(a, b):\n    return 3\n```"  # passes the public test, fails the hidden ones
HIDDEN_ONLY = "```python\ndef add(a, b):\n    return a + b if a != 1 else 0\n```"  # the reverse


class ScriptedContext:
    """A TrainerContext whose policy gives the first answer of ``answers``, then the next after each feedback,
    and whose ``sandbox`` (the only one a rollout may use) is at ``url`` and records the clients made from it."""

    def __init__(self, tokenizer: Any, answers: Sequence[str], url: str) -> None:
        self.tokenizer = tokenizer
        self.sandbox = RecordingSandbox((url,), retries=0)
        self.answers = list(answers)
        self.continued: list[list[int]] = []
        self.step = 0
        self.group_size = 1
        self.process_index = 0
        self.num_processes = 1

    def _ids(self, text: str) -> list[int]:
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        ids = [
            list(self.tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False))
            for p in prompts
        ]
        text = self.answers.pop(0)
        return Generation(
            ids, [self._ids(text) for _ in prompts], [[{"role": "assistant", "content": text}]] * len(prompts)
        )

    def generate_ids(self, prompt_ids: Sequence[list[int]]) -> Generation:
        self.continued += [list(p) for p in prompt_ids]
        text = self.answers.pop(0)
        n = len(prompt_ids)
        return Generation(
            list(prompt_ids), [self._ids(text) for _ in range(n)], [[{"role": "assistant", "content": text}]] * n
        )

    def gather(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def any_process(self, flag: bool) -> bool:
        return flag


class BaseContext(ScriptedContext):
    """A ScriptedContext for a policy without a chat template: plain prompts, plain completions."""

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        ids = [list(self.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
        text = self.answers.pop(0)
        return Generation(ids, [self._ids(text) for _ in prompts], [text] * len(prompts))

    def generate_ids(self, prompt_ids: Sequence[list[int]]) -> Generation:
        self.continued += [list(p) for p in prompt_ids]
        text = self.answers.pop(0)
        return Generation(list(prompt_ids), [self._ids(text) for _ in prompt_ids], [text] * len(prompt_ids))


def repair(tokenizer: Any, **kwargs: Any) -> CodeRepairRollout:
    return CodeRepairRollout({"add": ADD}, tokenizer, True, **kwargs)


def row() -> dict[str, Any]:
    return {"prompt": [{"role": "user", "content": ADD.prompt}], "task_id": "add"}


def test_the_feedback_shows_what_task_visible_tests_gives(
    tiny_model_dir: Path, sandbox_process: LoopbackServer
) -> None:
    # the rule every front door shares (its unit test: the evaluator's tests/tasks/test_adapters.py)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert CodeRepairRollout({}, tokenizer, True).public_tests == PUBLIC_TESTS
    context = ScriptedContext(tokenizer, [WRONG, RIGHT], sandbox_process.url)
    repair(tokenizer, public_tests=9)(context, [row()])  # type: ignore[arg-type]
    (continued,) = context.continued
    assert "0 of 2 tests passed" in tokenizer.decode(continued)  # more asked for than it has: one stays hidden
    # a dataset that marks none of its tests public shows none (never a hidden one): nothing to repair on
    context = ScriptedContext(tokenizer, [WRONG], sandbox_process.url)
    unshown = {"add": replace(ADD, metadata={"public_tests": 0})}
    rollout = CodeRepairRollout(unshown, tokenizer, True)(
        context,  # type: ignore[arg-type]
        [row()],
    )
    assert context.continued == [] and rollout.extra["turns"] == [1] and rollout.extra["tests"] == ["0/3"]
    assert rollout.metrics["repair/pass_rate/turn_1"] == 0.0  # no public test passed: there was none
    assert public_task(ADD, 9).tests == ADD.visible_tests(9)  # the tools path's view of the same rule


def test_feedback_reaches_the_next_turn_and_is_masked_out(
    tiny_model_dir: Path, sandbox_process: LoopbackServer
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = ScriptedContext(tokenizer, [WRONG, RIGHT], sandbox_process.url)
    rollout = repair(tokenizer, max_turns=3, turn_discount=0.5)(context, [row()])  # type: ignore[arg-type]
    # the second turn continued from the exact tokens: prompt, the first answer, the feedback
    (continued,) = context.continued
    shown = tokenizer.decode(continued)
    assert "0 of 1 tests passed" in shown and "First failure" in shown and ASK_AGAIN in shown
    assert "[5, 5]" not in shown  # a hidden test's input never reaches the policy
    ids, mask = rollout.completion_ids[0], rollout.completion_mask[0]  # type: ignore[index]
    assert continued == rollout.prompt_ids[0] + ids[: len(continued) - len(rollout.prompt_ids[0])]
    policy = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    feedback = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert "a - b" in policy and "a + b" in policy and "tests passed" not in policy
    assert ASK_AGAIN in feedback and "a - b" not in feedback and "a + b" not in feedback
    assert 0 < sum(mask) < len(mask)
    # right on all tests at the second turn, discounted once; a right answer is not asked again
    assert rollout.rewards == [pytest.approx((1.0 + 0.05) * 0.5)]  # all pass, a fenced block; one turn late
    assert rollout.extra["turns"] == [2]
    assert rollout.metrics["repair/pass_rate/turn_1"] == 0.0 and rollout.metrics["repair/pass_rate/turn_2"] == 1.0
    assert rollout.metrics["repair/fixed"] == 1.0 and rollout.metrics["repair/final_pass_rate"] == 1.0


def test_the_reward_judges_all_tests(tiny_model_dir: Path, sandbox_process: LoopbackServer) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = ScriptedContext(tokenizer, [PUBLIC_ONLY], sandbox_process.url)
    rollout = repair(tokenizer, max_turns=2)(context, [row()])  # type: ignore[arg-type]
    assert context.continued == []  # passing its public test, it is not asked again
    assert rollout.rewards == [pytest.approx(0.05)] and rollout.extra["tests"] == ["1/3"]  # the fence alone
    assert rollout.metrics["repair/pass_rate/turn_1"] == 1.0 and rollout.metrics["repair/final_pass_rate"] == 0.0
    # with partial credit, the public test passed earns nothing: the feedback would show it, a table passes it
    context = ScriptedContext(tokenizer, [PUBLIC_ONLY], sandbox_process.url)
    rollout = repair(tokenizer, max_turns=2, partial_credit=True)(context, [row()])  # type: ignore[arg-type]
    assert rollout.rewards == [pytest.approx(0.05)] and rollout.extra["tests"] == ["1/3"]
    context = ScriptedContext(tokenizer, [HIDDEN_ONLY, HIDDEN_ONLY], sandbox_process.url)
    rollout = repair(tokenizer, max_turns=2, partial_credit=True)(context, [row()])  # type: ignore[arg-type]
    assert rollout.rewards == [pytest.approx(2 / 3 + 0.05)] and rollout.extra["tests"] == ["2/3"]


def test_a_base_policys_first_answer_is_the_block_its_prompt_opened(
    tiny_model_dir: Path, sandbox_process: LoopbackServer
) -> None:
    # the prompt of a policy without a chat template ends in an open fence; a right program that closes it and
    # then writes prose passes its public test (not asked again) and earns the reward, as codegym-eval judges it
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    right = "def add(a, b):\n    return a + b\n```\n\nThis adds the two numbers."
    context = BaseContext(tokenizer, [right, right], sandbox_process.url)
    base_row = {"prompt": prompt_of(ADD, chat=False), "task_id": "add"}
    rollout = CodeRepairRollout({"add": ADD}, tokenizer, False, max_turns=2)(context, [base_row])  # type: ignore[arg-type]
    assert context.continued == [] and rollout.extra["verdict"] == ["AC"] and rollout.extra["tests"] == ["3/3"]
    assert rollout.rewards == [pytest.approx(1.05)]


def test_the_rollout_reaches_the_sandbox_through_the_context_alone(
    tiny_model_dir: Path, sandbox_process: LoopbackServer
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = ScriptedContext(tokenizer, [WRONG, RIGHT], sandbox_process.url)
    rollout = repair(tokenizer, max_turns=2)(context, [row()])  # type: ignore[arg-type]
    # a scorer from the context's sandbox for each judging: the public tests after both turns, then all tests
    assert context.sandbox.made == ["scorer"] * 3 and rollout.extra["tests"] == ["3/3"]
    # the same rollout in a context whose sandbox is gone judges nothing: no feedback turn, the reward masked
    gone = ScriptedContext(tokenizer, [WRONG], f"http://127.0.0.1:{free_port()}")
    rollout = repair(tokenizer, max_turns=2)(gone, [row()])  # type: ignore[arg-type]
    assert gone.sandbox.made == ["scorer"] * 2 and gone.continued == []
    assert rollout.rewards == [None] and rollout.extra["verdict"] == ["SE"]


def test_two_steps_on_the_tiny_model(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    masks: list[torch.Tensor] = []
    compute_loss = CodegymGRPOTrainer._compute_loss

    def recording(self: CodegymGRPOTrainer, model: Any, inputs: dict[str, Any]) -> Any:
        masks.append(inputs["tool_mask"].detach().cpu())  # what TRL's loss multiplies into its mask
        return compute_loss(self, model, inputs)

    monkeypatch.setattr(CodegymGRPOTrainer, "_compute_loss", recording)
    out = tmp_path / "run"
    config = tiny_config(tiny_model_dir, out, task="code-repair", max_turns=2, skip_eval=True, max_completion_length=6)
    summary = run(config, console=Console(file=io.StringIO()))
    assert summary.steps == 2
    for r in train_rows(out):
        for key in (
            "repair/pass_rate/turn_1",
            "repair/pass_rate/turn_2",
            "repair/turns",
            "repair/fixed",
            "repair/broke",
        ):
            assert key in r, key
    table = [json.loads(x) for x in (out / "completions" / "step_00002.jsonl").read_text().splitlines()]
    asked = [r for r in table if r["turns"] == 2]
    assert asked and all(ASK_AGAIN in r["completion"][1]["content"] for r in asked)
    assert masks and any(bool((m == 0).any()) for m in masks)  # feedback tokens left out of the loss
