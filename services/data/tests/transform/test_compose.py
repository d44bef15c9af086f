"""The base class, Compose, seeding, the registry, and apply() on the task library's rows."""

from __future__ import annotations

import random

import pytest
from codegym_data.transform import (
    TRANSFORMATIONS,
    Compose,
    ForToWhile,
    InvertIf,
    Rename,
    UnknownTransformation,
    get_transformation,
    parse_transformations,
    row_rng,
)
from codegym_evaluator.tasks import load_tasks
from rewrite_support import call, rewrite

CODE = """
def f(xs):
    best = None
    for x in xs:
        if x > 0:
            best = x
        else:
            best = -x
    return best
"""


def test_compose_applies_each_step_in_order() -> None:
    both = Compose([ForToWhile(), InvertIf()])
    assert both.name == "for_to_while+invert_if"
    got = rewrite(both, CODE)
    assert got is not None and "while True" in got and "if not x > 0" in got
    assert call(got, "f", [3, -4]) == call(CODE, "f", [3, -4]) == 4
    # It applies when any step does, and is not applicable when none does.
    assert rewrite(Compose([InvertIf(), ForToWhile()]), "def f(x):\n    return x\n") is None
    assert rewrite(Compose([InvertIf(), ForToWhile()]), "def f(x):\n    for y in x:\n        pass\n") is not None


def test_unparsable_code_is_not_applicable_and_output_loses_comments() -> None:
    assert ForToWhile().transform_code("def f(:\n", random.Random(0)) is None
    got = rewrite(ForToWhile(), "def f(xs):\n    # sum\n    for x in xs:  # each\n        pass\n")
    assert got is not None and "#" not in got


def test_rows_get_their_own_generator() -> None:
    assert row_rng(0, "rename", "HumanEval/1").random() == row_rng(0, "rename", "HumanEval/1").random()
    assert row_rng(0, "rename", "HumanEval/1").random() != row_rng(0, "rename", "HumanEval/2").random()
    assert row_rng(0, "rename", "HumanEval/1").random() != row_rng(1, "rename", "HumanEval/1").random()


def test_the_registry_and_the_transform_lists() -> None:
    assert list(TRANSFORMATIONS) == [
        "for_to_while",
        "while_to_for",
        "rename",
        "invert_if",
        "comprehension_to_loop",
        "loop_to_comprehension",
        "dead_code",
        "reorder",
        "remove_docstrings",
    ]
    assert [t.name for t in parse_transformations("all")] == list(TRANSFORMATIONS)
    assert [t.name for t in parse_transformations("rename, for_to_while+invert_if")] == [
        "rename",
        "for_to_while+invert_if",
    ]
    assert isinstance(get_transformation("rename"), Rename)
    with pytest.raises(UnknownTransformation, match="unknown transformation 'nope'; known: for_to_while"):
        parse_transformations("rename,nope")
    with pytest.raises(UnknownTransformation, match="no transformation given"):
        parse_transformations(" , ")


def test_apply_on_humaneval_rows() -> None:
    tasks = load_tasks("humaneval", limit=5)
    out = Rename().apply(tasks, seed=3)
    assert [t.task_id for t in out] == [f"{t.task_id}#rename" for t in tasks if t.task_id != "HumanEval/2"]
    first = out[0]
    assert first.metadata["transformed_from"] == {"task_id": "HumanEval/0", "transformation": "rename", "seed": 3}
    # The whole function, with its entry point, replaces the body; the prompt and tests are the row's own.
    assert first.metadata["canonical_solution"].lstrip().startswith("from typing import List")
    assert "def has_close_elements(" in first.metadata["canonical_solution"]
    assert first.prompt == tasks[0].prompt and first.tests == tasks[0].tests
    assert Rename().apply(tasks, seed=3) == out
