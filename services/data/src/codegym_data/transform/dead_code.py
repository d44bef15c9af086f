"""Dead code: statements that cannot run, or that run and have no effect, inserted at random places."""

from __future__ import annotations

import ast
import random

from codegym_evaluator import python_syntax

from .base import Context, Transformation, blocks, is_docstring
from .scope import uses_dynamic_names

# Each binds only a fresh name (so nothing else can read it) and evaluates nothing but literals. ``{v}`` is the
# fresh name, ``{c}`` a literal. ``yield`` and ``return`` are never inserted: either would change what the
# function is (a generator) or returns.
TEMPLATES = (
    "{v} = {c}",
    "if False:\n    {v} = {c}",
    "while False:\n    {v} = {c}",
    "for {v} in ():\n    pass",
    "{v} = [{c}, {c}]",
    "if not True:\n    {v} = {c}",
)
LITERALS = ("0", "1", "-1", "None", "''", "'unused'", "2.5", "True")


class InsertDeadCode(Transformation):
    """One to three statements that cannot run (``if False:``) or have no effect (an unused assignment to a
    fresh name), each at a random place in a random body.

    Never in a class body (a new name there is a new attribute), never before a docstring (it would stop being
    one) or before ``from __future__`` imports (which must come first), and not at all in a program that reads
    its variables by name (``locals()``, ``globals()``, ``eval``), where a new name would show.
    """

    name = "dead_code"
    summary = "inserts 1-3 statements that cannot run or have no effect (if False: blocks, unused fresh names)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        if uses_dynamic_names(tree):
            return False  # a new name would show in locals(), globals() or vars()
        places: list[tuple[list[ast.stmt], int]] = []
        for block in blocks(tree):
            if block.class_body:
                continue
            first = _first_place(block.body)
            places += [(block.body, k) for k in range(first, len(block.body) + 1)]
        if not places:
            return False
        chosen = ctx.rng.sample(places, min(len(places), ctx.rng.randint(1, 3)))
        # Insert from the back so that the positions chosen in the same body stay right.
        for body, k in sorted(chosen, key=lambda p: (id(p[0]), -p[1])):
            body.insert(k, _snippet(ctx))
        return True


def _first_place(body: list[ast.stmt]) -> int:
    k = 1 if body and is_docstring(body[0]) else 0
    while k < len(body) and isinstance(statement := body[k], ast.ImportFrom) and statement.module == "__future__":
        k += 1
    return k


def _snippet(ctx: Context) -> ast.stmt:
    rng: random.Random = ctx.rng
    code = rng.choice(TEMPLATES).format(v=ctx.fresh.pick(rng), c=rng.choice(LITERALS))
    statement = python_syntax.parse(code).body[0]
    return statement
