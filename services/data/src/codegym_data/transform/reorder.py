"""Swapping adjacent statements that do not depend on each other."""

from __future__ import annotations

import ast

from .base import Block, Context, Transformation, blocks
from .purity import Purity


class ReorderStatements(Transformation):
    """Swaps adjacent assignments that are independent, choosing a random non-empty set of such pairs.

    Two statements may swap when each only binds names (no stores into objects, no ``+=``, which may change a
    list in place) from a pure expression (see ``purity``: no call that could have an effect), and neither binds
    a name the other reads or binds. The names a statement reads include every name in the body of each of the
    program's functions it calls. Statements inside ``try`` or ``with`` are left in place (an error raised
    half-way could be caught and the other statement's effect seen), as are class bodies (order of attributes)
    and module-level annotated assignments (order of ``__annotations__``). Two statements that would both
    raise on the same input raise in the other order; outside ``try`` that changes only which error ends the
    function.
    """

    name = "reorder"
    summary = "swaps adjacent independent assignments of pure values (read/write sets; never calls with effects)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        purity = Purity(tree)
        pairs: list[tuple[list[ast.stmt], int]] = []
        for block in blocks(tree):
            if block.class_body or block.guarded:
                continue
            effects = [_effects(s, block, purity) for s in block.body]
            for k in range(len(block.body) - 1):
                first, second = effects[k], effects[k + 1]
                if first is not None and second is not None and _independent(first, second):
                    pairs.append((block.body, k))
        if not pairs:
            return False
        order = list(range(len(pairs)))
        ctx.rng.shuffle(order)
        chosen: list[tuple[list[ast.stmt], int]] = []
        used: set[tuple[int, int]] = set()
        for n, index in enumerate(order):
            body, k = pairs[index]
            if (id(body), k) in used or (id(body), k + 1) in used:
                continue
            if n == 0 or ctx.rng.random() < 0.5:  # the first drawn pair always swaps
                chosen.append((body, k))
                used |= {(id(body), k), (id(body), k + 1)}
        for body, k in chosen:
            body[k], body[k + 1] = body[k + 1], body[k]
        return True


def _effects(statement: ast.stmt, block: Block, purity: Purity) -> tuple[set[str], set[str]] | None:
    """(names read, names bound) of a statement that may move, or None when it may not."""
    match statement:
        case ast.Assign(targets=targets, value=value):
            pass
        case ast.AnnAssign(target=ast.Name() as target, value=ast.expr() as value) if block.function is not None:
            targets = [target]
        case _:
            return None
    if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for t in targets for n in ast.walk(t)):
        return None
    if not purity.expression(value):
        return None
    bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return purity.reads(value), bound


def _independent(first: tuple[set[str], set[str]], second: tuple[set[str], set[str]]) -> bool:
    (reads1, writes1), (reads2, writes2) = first, second
    return not (writes1 & (reads2 | writes2) or writes2 & reads1)
