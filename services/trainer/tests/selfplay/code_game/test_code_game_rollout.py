"""The code-output game on the trainer's seam: a step's samples (writers, then self-play predictors) against a
real sandbox, per-role advantages, and a real optimisation step of a tiny model."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from codegym_evaluator.servers import LoopbackServer, free_port, sandbox_server
from codegym_trainer.grpo import CodegymGRPOTrainer
from codegym_trainer.rollout import Generation, Rollout
from codegym_trainer.selfplay.code_game.rollout import (
    FILLER_PROGRAM,
    PREDICTOR,
    WRITER,
    CodeGameAdvantage,
    CodeGameRollout,
    writer_dataset,
)
from codegym_trainer.selfplay.code_game.rules import WRITER_INVALID, WRITER_PROMPT, predictor_prompt
from recording_sandbox import RecordingSandbox
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")
T = TypeVar("T")


def writer(program: str, prediction: str) -> str:
    return f"```python\n{program}\n```\n```output\n{prediction}\n```"


def said(output: str) -> str:
    return f"```output\n{output}\n```"


class ScriptedContext:
    """A one-process trainer context whose policy answers from a script (the stand-in for a model), and whose
    ``sandbox`` (the only one a rollout may use) is at ``url`` and records the clients made from it."""

    step, group_size, process_index, num_processes, tokenizer = 0, 2, 0, 1, None

    def __init__(self, answers: dict[str, list[str]], others_predict: bool = False, url: str = "http://x") -> None:
        self.sandbox = RecordingSandbox((url,), concurrency=4, retries=0)
        self.answers = {prompt: list(texts) for prompt, texts in answers.items()}
        self.others_predict = others_predict  # as if another process had programs to predict
        self.calls: list[tuple[list[Any], int | None]] = []

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        self.calls.append((list(prompts), repeats))
        texts = [self.answers[prompt[0]["content"]].pop(0) for prompt in prompts]
        ids = [[len(t) % 7 + 1] for t in texts]
        return Generation([[1, 2]] * len(texts), ids, [[{"role": "assistant", "content": t}] for t in texts])

    def score(self, inputs: Any, prompts: Any, generation: Generation) -> dict[str, list[float | None]]:
        raise AssertionError("the game scores its own samples")

    def gather(self, values: Sequence[T]) -> list[T]:
        return list(values)

    def any_process(self, flag: bool) -> bool:
        return flag or self.others_predict


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LoopbackServer]:
    with sandbox_server(workers=2, backend="local") as server:
        yield server


@pytest.fixture
def url(sandbox: LoopbackServer) -> str:
    return sandbox.url


def game(programs: int, m: int, opponent: Any = None) -> CodeGameRollout:
    return CodeGameRollout(programs_per_step=programs, predictions_per_program=m, chat=True, opponent=opponent)


def rows(n: int) -> list[dict[str, Any]]:
    return writer_dataset(n, chat=True).to_list()


def test_self_play_makes_writer_then_predictor_samples(url: str) -> None:
    easy, hard = "print(7 * 6)", "print(sum(range(10)) % 7)"
    context = ScriptedContext(
        {
            WRITER_PROMPT: [writer(easy, "42"), "no program", writer(hard, "3"), writer("import os\nprint(1)", "1")],
            predictor_prompt(easy): [said("42"), said("42")],
            predictor_prompt(hard): [said("3"), said("5")],
        },
        url=url,
    )
    rollout = game(4, 2)(context, rows(2))

    writers, predictors = context.calls
    assert writers == ([[{"role": "user", "content": WRITER_PROMPT}]] * 4, 4)  # the rows only pace TRL
    asked = [p[0]["content"] for p in predictors[0]]
    assert asked == [predictor_prompt(easy)] * 2 + [predictor_prompt(hard)] * 2 and predictors[1] == 2
    assert len(rollout) == 8
    assert rollout.groups == [WRITER] * 4 + [PREDICTOR] * 4
    assert rollout.rewards == [-1.0, WRITER_INVALID, 0.0, WRITER_INVALID, 1.0, 1.0, 1.0, 0.0]
    assert rollout.extra["role"] == ["writer"] * 4 + ["predictor"] * 4
    assert rollout.extra["outcome"][:4] == ["played", "unparsable", "played", "rejected"]
    assert rollout.extra["output"] == ["42", None, "3", None, "42", "42", "3", "3"]
    assert rollout.texts[4:] == [said("42"), said("42"), said("3"), said("5")]
    assert rollout.completion_ids[4] == [len(said("42")) % 7 + 1]  # each sample keeps its own tokens
    assert rollout.metrics["code_game/invalid_rate"] == 0.5
    assert rollout.metrics["code_game/predictor_accuracy"] == 0.75


def test_a_process_with_nothing_to_predict_still_generates_with_the_others(url: str) -> None:
    filler = {predictor_prompt(FILLER_PROGRAM): ["x"] * 3}
    context = ScriptedContext({WRITER_PROMPT: ["nothing", "nothing"], **filler}, others_predict=True, url=url)
    rollout = game(2, 3)(context, rows(2))
    assert len(context.calls) == 2 and context.calls[1][1] == 3  # the filler, M of them
    assert len(rollout) == 2 and rollout.rewards == [WRITER_INVALID] * 2  # its answers are thrown away
    alone = ScriptedContext({WRITER_PROMPT: ["nothing", "nothing"]}, others_predict=False, url=url)
    game(2, 3)(alone, rows(2))
    assert len(alone.calls) == 1  # nobody predicts: no generation at all


def test_against_a_frozen_opponent_only_writers_learn(url: str) -> None:
    program = "print('ab' * 2)"
    context = ScriptedContext({WRITER_PROMPT: [writer(program, "abab"), writer(program, "abba")]}, url=url)
    asked: list[tuple[list[str], int]] = []

    def opponent(prompts: Sequence[str], m: int) -> list[list[str]]:
        asked.append((list(prompts), m))
        return [[said("abab"), said("?"), said("?")] for _ in prompts]

    rollout = game(2, 3, opponent)(context, rows(2))
    assert asked == [([predictor_prompt(program)] * 2, 3)] and len(context.calls) == 1
    assert rollout.groups == [WRITER, WRITER]
    assert rollout.rewards == [pytest.approx(1 - 2 / 3), -1.25]  # the second mispredicted its own output


def test_the_game_runs_its_programs_in_the_contexts_sandbox_alone(url: str) -> None:
    program = "print(6 * 7)"

    def opponent(prompts: Sequence[str], m: int) -> list[list[str]]:
        return [[said("0")] * m for _ in prompts]

    context = ScriptedContext({WRITER_PROMPT: [writer(program, "42")]}, url=url)
    assert game(1, 1, opponent)(context, rows(1)).rewards == [1.0]
    assert context.sandbox.made == ["client"]  # one client per step, from the context's sandbox
    # the same game in a context whose sandbox is gone: the program is not judged, the writer's reward masked
    gone = ScriptedContext({WRITER_PROMPT: [writer(program, "42")]}, url=f"http://127.0.0.1:{free_port()}")
    rollout = game(1, 1, opponent)(gone, rows(1))
    assert gone.sandbox.made == ["client"] and rollout.rewards == [None]


def samples(groups: list[Any], rewards: list[float | None]) -> Rollout:
    n = len(groups)
    return Rollout(["p"] * n, ["c"] * n, [[1]] * n, [[2]] * n, rewards, groups)


def test_each_role_has_its_own_baseline_and_masked_samples_have_no_advantage() -> None:
    advantage, context = CodeGameAdvantage(), ScriptedContext({})
    first = samples([WRITER, WRITER, PREDICTOR, WRITER], [1.0, -1.5, 1.0, None])
    assert advantage(first, context) == [1.0, -1.5, 1.0, 0.0]  # baselines start at 0
    # writer: 0.95**2 * 0 + (1 - 0.95**2) * (-0.25); predictor: 0.05 * 1
    writer_b, predictor_b = (1 - 0.95**2) * -0.25, 0.05
    assert first.metrics["rae/baseline/code-game/writer"] == pytest.approx(writer_b)
    assert first.metrics["rae/baseline/code-game/predictor"] == pytest.approx(predictor_b)
    second = samples([PREDICTOR, WRITER], [0.0, -1.0])
    assert advantage(second, context) == pytest.approx([-predictor_b, -1.0 - writer_b])
    with pytest.raises(ValueError, match="belongs to"):
        advantage(samples([("tictactoe", "X")], [1.0]), context)


def test_a_real_training_step_of_the_game(tiny_model_dir: Path, tmp_path: Path, url: str) -> None:
    # the untrained tiny model writes no program: every writer is invalid, and no predictor is asked
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    game = CodeGameRollout(programs_per_step=3, predictions_per_program=2, chat=True)
    sandbox = RecordingSandbox((url,))
    trainer = CodegymGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        processing_class=tokenizer,
        reward_funcs=[lambda **kwargs: [0.0]],  # TRL wants one; the game scores its own samples
        args=args,
        train_dataset=writer_dataset(8, chat=True),
        completions_interval=1,
        step_rollout=game,
        step_advantage=CodeGameAdvantage(),
        sandbox=sandbox,
    )
    trainer.train()
    assert [r.result.outcome for r in game.rounds] == ["unparsable"] * 3
    assert sandbox.made == ["client"]  # the trainer's context gave the step's runs the run's sandbox
    table = [json.loads(line) for line in (tmp_path / "completions" / "step_00001.jsonl").read_text().splitlines()]
    assert [(row["role"], row["reward"], row["advantage"]) for row in table] == [("writer", -1.5, -1.5)] * 3
    logged = next(row for row in trainer.state.log_history if "code_game/invalid_rate" in row)
    assert logged["code_game/invalid_rate"] == 1.0 and logged["reward"] == -1.5
    assert logged["rae/baseline/code-game/writer"] == pytest.approx((1 - 0.95**3) * -1.5)
