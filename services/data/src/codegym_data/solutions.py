"""Reference solutions of the task library's rows: the program to transform, and a task that carries a new one.

Every adapter of ``codegym_evaluator.tasks`` keeps a row's reference solution in
``Task.metadata["canonical_solution"]``, and the sandbox runs ``starter_code`` followed by it:

- a whole program for MBPP (``code``), APPS and TACO (the first of ``solutions``), CodeContests (the first
  Python solution), LeetCode (``completion``: ``class Solution``, after the row's imports and helpers);
- the body of the function for HumanEval: the whole function is the prompt (the starter code) followed by it.

A transformation works on the whole program (for HumanEval, prompt and body together), and a transformed row's
``canonical_solution`` is that whole program. The starter code still runs before it, and the program
redefines what the starter code defined, as a chat model's complete answer does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from codegym_evaluator import python_syntax
from codegym_evaluator.scoring import build_program
from codegym_evaluator.tasks import Task

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Reference:
    """A task's reference solution, as stored (``completion``) and as a whole program (``source``)."""

    completion: str  # what follows the starter code
    source: str  # the program a transformation rewrites
    keep: frozenset[str]  # names the tests reach from outside: the entry point and every name their code spells


def reference(task: Task) -> Reference | None:
    """The task's Python reference solution, or None when it has none (or one that does not parse)."""
    solution = task.metadata.get("canonical_solution")
    if task.language != "python" or not isinstance(solution, str) or not solution.strip():
        return None
    # A whole program parses alone; HumanEval's body parses only after its prompt.
    for source in (solution, build_program(task, solution)):
        if _parses(source):
            return Reference(solution, source, keep_names(task))
    return None


def keep_names(task: Task) -> frozenset[str]:
    """The names the tests may use from the program: the entry point, and every identifier in the tests' code."""
    names = {task.entry_point} if task.entry_point else set()
    if task.kind in ("assert", "call"):
        for test in task.tests:
            for key in ("assert_code", "call"):
                names |= set(_IDENTIFIER.findall(str(test.get(key) or "")))
    return frozenset(names)


def transformed(task: Task, code: str, transformation: str, seed: int) -> Task:
    """``task`` with ``code`` as its reference solution, under the id ``<task_id>#<transformation>``."""
    origin: dict[str, Any] = {"task_id": task.task_id, "transformation": transformation, "seed": seed}
    metadata = {**task.metadata, "canonical_solution": code, "transformed_from": origin}
    return replace(task, task_id=f"{task.task_id}#{transformation}", metadata=metadata)


def _parses(source: str) -> bool:
    try:
        python_syntax.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True
