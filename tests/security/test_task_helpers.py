"""A program that redefines the helpers a task's tests take from its prompt passes nothing: on every backend.

HumanEval/32, /38 and /50 test the answer with ``poly``, ``encode_cyclic`` and ``encode_shift``, defined in the
prompt that the program starts with. The evaluator sends the prompt's helpers with the tests (see
``codegym_evaluator.tasks.prompt_helpers``), so the checker runs its own copies whatever the program binds.
"""

from __future__ import annotations

import asyncio

import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task, load_tasks
from fastapi.testclient import TestClient

from .transports import forwarding

# Per task: a wrong answer (the body of the prompt's stub), the helper the tests use, and its arguments.
WRONG = {
    "HumanEval/32": ("    return 0.0\n", "poly", "xs, x", "0.0"),
    "HumanEval/38": ("    return s\n", "encode_cyclic", "s", "s"),
    "HumanEval/50": ("    return s\n", "encode_shift", "s", "s"),
}
# Ways to make the helper agree with the wrong answer.
REBINDS = {
    "def": "def {name}({args}):\n    return {value}\n",
    "lambda": "{name} = lambda {args}: {value}\n",
    "globals": "globals()[{name!r}] = lambda {args}: {value}\n",
    "callable-object": "class _H:\n    def __call__(self, {args}):\n        return {value}\n{name} = _H()\n",
    "builtins": "import builtins\nbuiltins.{name} = lambda {args}: {value}\ndel {name}\n",
    "module-attribute": "import sys\nsetattr(sys.modules[__name__], {name!r}, lambda {args}: {value})\n",
    "at-exit": "import atexit\natexit.register(lambda: globals().__setitem__({name!r}, lambda {args}: {value}))\n",
    "a-plain-value": "{name} = {value!r}\n",
}


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.task_id: t for t in load_tasks("humaneval") if t.task_id in WRONG}


def verdicts(hostile: TestClient, task: Task, completions: list[str]) -> list[str]:
    async def score() -> list[str]:
        async with Scorer("http://sandbox", transport=forwarding(hostile), batch_runs=0, retries=0) as scorer:
            return [s.verdict for s in await scorer.score_group(task, completions, extract=False)]

    return asyncio.run(score())


@pytest.mark.parametrize("rebind", sorted(REBINDS))
def test_a_rebound_helper_beside_a_wrong_answer_is_not_accepted(
    hostile: TestClient, tasks: dict[str, Task], rebind: str
) -> None:
    for task_id, task in sorted(tasks.items()):
        body, name, args, value = WRONG[task_id]
        forged = body + "\n\n" + REBINDS[rebind].format(name=name, args=args, value=value)
        got = verdicts(hostile, task, [body, forged, task.metadata["canonical_solution"]])
        assert got[0] == "WA" and got[1] != "AC" and got[2] == "AC", (task_id, rebind, got)
