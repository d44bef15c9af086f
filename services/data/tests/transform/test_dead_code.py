"""Dead code: inserted where it cannot change anything, seeded, and never where it would."""

from __future__ import annotations

import ast

from codegym_data.transform import InsertDeadCode
from rewrite_support import call, rewrite

DEAD = InsertDeadCode()

CODE = '''
"""A module."""
from __future__ import annotations

def f(xs):
    """Sum of the odd ones."""
    total = 0
    for x in xs:
        if x % 2:
            total += x
    return total

class Point:
    x = 1
    y = 2
'''


def statements(code: str) -> int:
    return sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(code)))


def test_one_to_three_statements_inserted_and_the_program_computes_the_same() -> None:
    for seed in range(20):
        got = rewrite(DEAD, CODE, seed=seed)
        assert got is not None
        added = statements(got) - statements(CODE)
        assert 1 <= added <= 6, got  # a snippet is one statement, or two with its block
        assert call(got, "f", [1, 2, 3]) == 4
        namespace: dict[str, object] = {}
        exec(got, namespace)
        assert namespace["__doc__"] == "A module." and namespace["f"].__doc__ == "Sum of the odd ones."
        (point,) = [n for n in ast.walk(ast.parse(got)) if isinstance(n, ast.ClassDef)]
        assert len(point.body) == 2  # a class body gets no new attribute


def test_seeded() -> None:
    assert rewrite(DEAD, CODE, seed=3) == rewrite(DEAD, CODE, seed=3)
    assert len({rewrite(DEAD, CODE, seed=s) for s in range(10)}) > 5


def test_inserted_names_are_fresh() -> None:
    got = rewrite(DEAD, "def f(temp):\n    value = temp\n    return value\n", seed=0)
    assert got is not None
    new_names = {n.id for n in ast.walk(ast.parse(got)) if isinstance(n, ast.Name)} - {"temp", "value", "False", "True"}
    assert new_names and not new_names & {"temp", "value", "f"}
    assert call(got, "f", 7) == 7


def test_a_program_that_reads_its_variables_by_name_is_left_alone() -> None:
    assert rewrite(DEAD, "def f():\n    x = 1\n    return sorted(locals())\n") is None
