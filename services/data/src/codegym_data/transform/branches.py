"""``if``/``else`` inversion: negate the condition and swap the branches."""

from __future__ import annotations

import ast

from .base import Context, Transformation

# ``x is not y`` is defined as ``not (x is y)``, ``x not in y`` as ``not (x in y)``: flipping them is exact.
# ``<`` and ``>=`` are not each other's negation (NaN, sets, user types), so those get a ``not``.
_FLIPPED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def negate(test: ast.expr) -> ast.expr:
    """The condition that is true exactly when ``test`` is false."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand  # only used as a condition, where ``x`` and ``not not x`` are the same
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _FLIPPED:
        return ast.Compare(test.left, [_FLIPPED[type(test.ops[0])]()], test.comparators)
    return ast.UnaryOp(ast.Not(), test)


class InvertIf(Transformation):
    """Every ``if`` with an ``else`` (and every ``a if c else b``) with its condition negated and branches swapped.

    An ``elif`` chain is an ``if`` whose ``else`` holds the next ``if``: the outer one is inverted (its ``else``
    becomes a nested ``if``), and so is each inner one. An ``if`` without ``else`` is left alone.
    """

    name = "invert_if"
    summary = "if/else (and conditional expressions) with the condition negated and the branches swapped"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = False
        for node in ast.walk(tree):
            if (isinstance(node, ast.If) and node.orelse) or isinstance(node, ast.IfExp):
                node.test, node.body, node.orelse = negate(node.test), node.orelse, node.body
                changed = True
        return changed
