"""The held-out output-prediction evaluation of a code-game run: scoring a policy, its files, its callback."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from codegym_trainer.logs import MetricsSink, read_metrics
from codegym_trainer.selfplay.arena import BatchPolicy
from codegym_trainer.selfplay.code_game.evaluation import (
    ACCURACY,
    OutputPredictionCallback,
    OutputPredictionEvaluator,
    greedy_policy,
)
from codegym_trainer.selfplay.code_game.output_prediction import OutputProblem, load_output_problems
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerControl, TrainerState, TrainingArguments

PROBLEMS = load_output_problems()[:4]


def knows(right: set[str]) -> BatchPolicy:
    """A policy that gives the right output for the problems in ``right`` and a wrong one for the rest."""
    by_prompt = {p.prompt(): p for p in PROBLEMS}

    def policy(prompts: Sequence[str]) -> list[str]:
        problems = [by_prompt[p] for p in prompts]
        return [f"```output\n{p.output if p.task_id in right else 'no'}\n```" for p in problems]

    return policy


def test_the_evaluator_scores_a_policy_and_writes_every_answer(tmp_path: Path) -> None:
    evaluator = OutputPredictionEvaluator(PROBLEMS, tmp_path / "code_game_eval")
    right = {PROBLEMS[0].task_id, PROBLEMS[2].task_id}
    metrics = evaluator(knows(right), 3)
    assert metrics[ACCURACY] == 0.5 and metrics["code_game/eval/output_correct"] == 2.0
    rows = [json.loads(line) for line in (tmp_path / "code_game_eval" / "step_00003.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in rows] == [p.task_id for p in PROBLEMS]
    assert [r["correct"] for r in rows] == [True, False, True, False]
    assert rows[1]["answer"] == "```output\nno\n```" and rows[1]["output"] == PROBLEMS[1].output
    assert evaluator.history == [(3, 0.5)]
    with pytest.raises(ValueError):
        OutputPredictionEvaluator([])


def test_greedy_answers_do_not_depend_on_the_batch(tiny_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"  # as load_tokenizer leaves it
    torch.manual_seed(0)
    with torch.no_grad():  # an untrained tiny model repeats one special token whatever it reads: make it talk
        for weight in model.parameters():
            weight.add_(torch.randn_like(weight))
    model.train(True)
    prompts = ["What does print(1) print?", "What does this long program print: x = 1; print(x)?", "Hi"]
    alone = greedy_policy(model, tokenizer, max_new_tokens=5, batch_size=1)(prompts)
    together = greedy_policy(model, tokenizer, max_new_tokens=5, batch_size=3)(prompts)
    assert len(alone) == 3 and len(set(alone)) == 3 and all(alone)
    assert together == alone  # left padding leaves every answer as it was alone
    assert model.training  # put back as it was


def test_the_callback_logs_before_training_and_every_interval(tiny_model_dir: Path, tmp_path: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    problems = [OutputProblem("one", "print(1)", "1\n"), OutputProblem("two", "print(2)", "2\n")]
    sink = MetricsSink(tmp_path)
    callback = OutputPredictionCallback(
        OutputPredictionEvaluator(problems, tmp_path / "code_game_eval"),
        sink,
        tokenizer,
        interval=2,
        max_new_tokens=4,
        batch_size=2,
    )
    args, control = TrainingArguments(output_dir=str(tmp_path), use_cpu=True), TrainerControl()
    state = TrainerState(max_steps=4)
    callback.on_train_begin(args, state, control, model=model)
    for step in (1, 2, 3):
        state.global_step = step
        callback.on_step_end(args, state, control, model=model)
    sink.close()
    evals = [row for row in read_metrics(tmp_path / "metrics.jsonl") if row["kind"] == "eval"]
    assert [row["step"] for row in evals] == [0, 2]
    assert all(row[ACCURACY] == 0.0 for row in evals)  # an untrained tiny model writes no output block
    assert sorted(p.name for p in (tmp_path / "code_game_eval").iterdir()) == ["step_00000.jsonl", "step_00002.jsonl"]
    assert callback.evaluated(2) and not callback.evaluated(3)
