"""``codegym-train --task code-repair --tools``: TRL's environment path through the trainer's run.

A real one-step run of the trainer (its configuration, lifecycle and seam) on a tiny model whose chat template
calls tools, taught to answer the trainer's prompt with one ``run_tests`` call: TRL's tool loop must run the
tool in the sandbox, the reward must be the environment's ``get_reward`` (the program on all the task's tests),
and the tool result's tokens must reach TRL's loss as 0s of its ``tool_mask``. A model whose template has no
tool calls is refused with a message that points to ``--task code-repair`` without ``--tools``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from codegym_evaluator.prompts import chat_messages
from codegym_evaluator.servers import LoopbackServer
from codegym_evaluator.tasks import Task
from codegym_trainer.cli import main
from codegym_trainer.config import EMBEDDED_MODEL, ConfigError, TrainConfig
from codegym_trainer.grpo import CodegymGRPOTrainer
from codegym_trainer.policy_loading import load_tokenizer, resolve_source
from codegym_trainer.repair.tools import TaskEnvironment, check_tools
from codegym_trainer.run import run
from rich.console import Console
from test_train_tiny import tiny_config, train_rows
from test_trl_code_environment import tool_calling_model

ADD = Task(
    task_id="add",
    prompt="Add two numbers.",
    kind="stdio",
    tests=[{"stdin": "1 2\n", "expected_stdout": "3\n"}, {"stdin": "5 5\n", "expected_stdout": "10\n"}],
)


@pytest.mark.filterwarnings("ignore:You are using 'environment_factory'")
def test_one_step_through_trls_tool_loop(
    sandbox_process: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(ADD.to_dict()) + "\n")
    # the model learns the prompt the run shows: the task's messages, its public test, the environment's tools
    environment = TaskEnvironment("http://127.0.0.1:9", tasks={"add": ADD}, public_tests=1)
    model = tool_calling_model(tmp_path / "model", environment, prompt=chat_messages(ADD), task_id="add")
    masks: list[torch.Tensor] = []
    compute_loss = CodegymGRPOTrainer._compute_loss

    def recording(self: CodegymGRPOTrainer, model: Any, inputs: dict[str, Any]) -> Any:
        masks.append(inputs["tool_mask"].detach().cpu())  # what TRL's loss multiplies into its mask
        return compute_loss(self, model, inputs)

    monkeypatch.setattr(CodegymGRPOTrainer, "_compute_loss", recording)
    out = tmp_path / "run"
    config = tiny_config(
        model,
        out,
        task="code-repair",
        tools=True,
        max_turns=1,
        dataset="jsonl",
        dataset_path=str(tasks),
        sandbox_url=[sandbox_process.url],
        batch_size=1,  # one task: one group of two rollouts
        train_steps=1,
        train_temperature=0.05,
        max_completion_length=256,  # the call, its result and the next turn (TRL's whole completion)
        skip_eval=True,
    )
    summary = run(config, console=Console(file=io.StringIO()))
    assert summary.steps == 1
    (row,) = train_rows(out)
    assert row["tools/call_frequency"] == 1.0 and row["tools/failure_frequency"] == 0.0
    # the environment's reward alone: the program passes the hidden test too
    assert row["rewards/TaskEnvironment/mean"] == 1.0 and row["reward"] == 1.0
    assert not any(key.startswith("rewards/SandboxReward") for key in row)
    table = [json.loads(x) for x in (out / "completions" / "step_00001.jsonl").read_text().splitlines()]
    assert len(table) == 2
    for sample in table:
        assert sample["completion"][0]["tool_calls"][0]["function"]["name"] == "run_tests"
        tool = [m for m in sample["completion"] if m["role"] == "tool"]
        assert tool and tool[0]["content"].startswith("All 1 tests passed.")  # the public test only was run
    assert masks and all(bool((m == 0).any()) for m in masks)  # the tool result's tokens left out of the loss


def test_a_template_without_tools_is_refused(tiny_model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    config = tiny_config(tiny_model_dir, tmp_path / "run", task="code-repair", tools=True)
    with pytest.raises(ConfigError, match="whose chat template calls tools"):
        run(config, console=Console(file=io.StringIO()))
    argv = ["--model", str(tiny_model_dir), "--task", "code-repair", "--tools", "--output-dir", str(tmp_path / "c")]
    assert main(argv) == 2
    assert "--task code-repair without --tools" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_smollm2_has_no_tool_calls() -> None:
    tokenizer = load_tokenizer(resolve_source(EMBEDDED_MODEL), offline=True)
    config = TrainConfig(task="code-repair", tools=True)
    with pytest.raises(ConfigError, match=r"SmolLM2-135M-Instruct has none.*--task code-repair without --tools"):
        check_tools(config, tokenizer)
    with pytest.raises(ConfigError, match="not --task spiral"):
        run(TrainConfig(task="spiral", tools=True), console=Console(file=io.StringIO()))


def test_a_humaneval_shaped_task_shows_and_runs_its_first_asserts_only() -> None:
    # One assert test holding every assert (HumanEval's and LeetCode's shape): the environment shows, and
    # run_tests runs, the cut copy Task.visible_tests gives, never the whole test the reward judges.
    check = "def check(candidate):\n" + "".join(
        f"    assert candidate({x}) == {y}\n" for x, y in [(1, 2), (2, 3), (3, 4), (10, 4242)]
    )
    task = Task("HumanEval/x", "def f(x):\n    pass\n", "assert", [{"assert_code": check + "\ncheck(f)\n"}], "f")
    environment = TaskEnvironment("http://127.0.0.1:9", tasks={task.task_id: task}, public_tests=2)
    shown = environment.reset(task_id=task.task_id)
    assert shown is not None and "candidate(2) == 3" in shown
    assert "candidate(3)" not in shown and "4242" not in shown
    whole, public = environment._tests()
    assert whole is task and public is not None and public.tests == task.visible_tests(2)
