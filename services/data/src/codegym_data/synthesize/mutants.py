"""Mutants of a reference solution: small, plausible bugs made on its syntax tree, to test its tests.

Each operator names the places of a program where it applies (a *site*: a node, and a variant of the change
there); a mutant is the program with exactly one site changed. ``generate_mutants`` builds every site's
mutant, keeps those that differ from the original and compile, and draws ``n`` of them with the caller's
``random.Random``, taking operators in turn so that one operator with many sites does not crowd out the rest.

A test suite that no mutant survives is not proof of good tests (an equivalent mutant, one that behaves as
the original does, survives any suite), which is why the pipeline asks for a share of mutants killed, not all.
"""

from __future__ import annotations

import ast
import copy
import random
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from codegym_evaluator import python_syntax


@dataclass(frozen=True)
class Mutant:
    """One changed program: which operator made it, at which line of the original, and its source."""

    operator: str
    line: int
    code: str


class Operator(ABC):
    """A kind of change. ``variants`` lists the changes possible at a node (empty: none), ``apply`` returns the
    node that replaces it (None removes a statement)."""

    name: ClassVar[str]
    summary: ClassVar[str]

    @abstractmethod
    def variants(self, node: ast.AST) -> list[Any]: ...

    @abstractmethod
    def apply(self, node: ast.AST, variant: Any) -> ast.AST | None: ...


_FLIPPED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


class FlipComparison(Operator):
    """``<`` and ``<=``, ``>`` and ``>=`` (the boundary bugs), ``==`` and ``!=``, ``in`` and ``not in``, ``is``
    and ``is not``: one operator of a comparison chain per mutant."""

    name = "flip_comparison"
    summary = "< <=, > >=, == !=, in / not in, is / is not"

    def variants(self, node: ast.AST) -> list[Any]:
        if not isinstance(node, ast.Compare):
            return []
        return [i for i, op in enumerate(node.ops) if type(op) in _FLIPPED]

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        assert isinstance(node, ast.Compare)
        ops = list(node.ops)
        ops[variant] = _FLIPPED[type(ops[variant])]()
        return ast.Compare(left=node.left, ops=ops, comparators=node.comparators)


class OffByOne(Operator):
    """An integer literal one more or one less (bools are not integers here: ``swap_boolean`` has them)."""

    name = "off_by_one"
    summary = "an integer literal n becomes n+1 or n-1"

    def variants(self, node: ast.AST) -> list[Any]:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return [1, -1]
        return []

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        assert isinstance(node, ast.Constant)
        return ast.Constant(node.value + variant)


# One replacement per operator, chosen to stay type-plausible: string and list + become -, which fails loudly,
# and * becomes //, which a test with any factor but 1 notices.
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}


class SwapArithmetic(Operator):
    """``+`` and ``-``, ``*`` and ``//``, ``/`` to ``*``, ``%`` to ``//``, ``**`` to ``*``; in ``x += y`` too."""

    name = "swap_arithmetic"
    summary = "+ -, * //, / *, % //, ** * (also in augmented assignments)"

    def variants(self, node: ast.AST) -> list[Any]:
        return [None] if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC else []

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        assert isinstance(node, (ast.BinOp, ast.AugAssign))
        changed = copy.copy(node)
        changed.op = _ARITHMETIC[type(node.op)]()
        return changed


class NegateCondition(Operator):
    """The condition of an ``if``, ``while`` or ``a if c else b`` negated (``not c``; ``not c`` becomes ``c``)."""

    name = "negate_condition"
    summary = "the condition c of if / while / a if c else b becomes not c"

    def variants(self, node: ast.AST) -> list[Any]:
        return [None] if isinstance(node, (ast.If, ast.While, ast.IfExp)) else []

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        assert isinstance(node, (ast.If, ast.While, ast.IfExp))
        changed = copy.copy(node)
        test = node.test
        negated = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
        changed.test = negated if negated is not None else ast.UnaryOp(op=ast.Not(), operand=test)
        return changed


class SwapBoolean(Operator):
    """``and`` and ``or``; the literals ``True`` and ``False``."""

    name = "swap_boolean"
    summary = "and / or, True / False"

    def variants(self, node: ast.AST) -> list[Any]:
        if isinstance(node, ast.BoolOp) or (isinstance(node, ast.Constant) and isinstance(node.value, bool)):
            return [None]
        return []

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(op=ast.Or() if isinstance(node.op, ast.And) else ast.And(), values=node.values)
        assert isinstance(node, ast.Constant)
        return ast.Constant(not node.value)


_CONSTANTS = ("None", "0", "1", "''", "True", "False", "[]")


class ConstantReturn(Operator):
    """A ``return``'s value replaced by a constant (``None``, ``0``, ``1``, ``''``, ``True``, ``False``, ``[]``),
    each one that differs from what the statement returns now."""

    name = "constant_return"
    summary = "return x becomes return None / 0 / 1 / '' / True / False / []"

    def variants(self, node: ast.AST) -> list[Any]:
        if not isinstance(node, ast.Return):
            return []
        now = ast.unparse(node.value) if node.value is not None else "None"
        return [c for c in _CONSTANTS if c != now]

    def apply(self, node: ast.AST, variant: Any) -> ast.AST:
        return ast.Return(value=python_syntax.parse(variant, mode="eval").body)


class DeleteStatement(Operator):
    """One statement removed (``pass`` fills a body left empty). Definitions, imports, ``global``, docstrings
    and ``pass`` are left alone: removing them either changes nothing or only makes a name undefined."""

    name = "delete_statement"
    summary = "one statement removed (not definitions, imports, docstrings)"

    _KEPT = (
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Import,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        ast.Pass,
    )

    def variants(self, node: ast.AST) -> list[Any]:
        if not isinstance(node, ast.stmt) or isinstance(node, self._KEPT):
            return []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # a docstring
        return [None]

    def apply(self, node: ast.AST, variant: Any) -> None:
        return None


OPERATORS: tuple[Operator, ...] = (
    FlipComparison(),
    OffByOne(),
    SwapArithmetic(),
    NegateCondition(),
    SwapBoolean(),
    ConstantReturn(),
    DeleteStatement(),
)


class _Sites(ast.NodeTransformer):
    """Numbers the nodes in the order ``NodeTransformer`` visits them: collects an operator's sites, or (given
    ``target``) replaces the node with that number. The numbering is the same in both uses, since the nodes
    before the target are visited alike."""

    def __init__(self, operator: Operator, target: tuple[int, Any] | None = None) -> None:
        self.operator = operator
        self.target = target
        self.index = -1
        self.sites: list[tuple[int, Any, int]] = []  # (node number, variant, line)

    def visit(self, node: ast.AST) -> Any:
        self.index += 1
        if self.target is None:
            line = getattr(node, "lineno", 0)
            self.sites += [(self.index, v, line) for v in self.operator.variants(node)]
        elif self.index == self.target[0]:
            return self.operator.apply(node, self.target[1])
        return self.generic_visit(node)


def _fill_empty_bodies(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.stmt, ast.excepthandler)) and isinstance(body, list) and not body:
            body.append(ast.Pass())


def _compiles(code: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a mutant may compare with `is` against a literal: valid, if odd
            compile(code, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def all_mutants(source: str, operators: Sequence[Operator] = OPERATORS) -> list[Mutant]:
    """Every distinct mutant of ``source`` that differs from it and compiles, operator by operator, in the
    order of the sites."""
    original = python_syntax.parse(source)
    printed = ast.unparse(original)
    seen = {printed}
    out: list[Mutant] = []
    for operator in operators:
        finder = _Sites(operator)
        finder.visit(copy.deepcopy(original))
        for index, variant, line in finder.sites:
            tree = copy.deepcopy(original)
            tree = _Sites(operator, (index, variant)).visit(tree)
            _fill_empty_bodies(tree)
            code = ast.unparse(ast.fix_missing_locations(tree))
            if code in seen or not _compiles(code):
                continue
            seen.add(code)
            out.append(Mutant(operator.name, line, code))
    return out


def generate_mutants(
    source: str, n: int, rng: random.Random, operators: Sequence[Operator] = OPERATORS
) -> list[Mutant]:
    """Up to ``n`` mutants of ``source``, drawn with ``rng``: each operator's mutants shuffled, then one operator
    after another (in ``operators``' order) until ``n`` are taken or none is left."""
    by_operator: dict[str, list[Mutant]] = {op.name: [] for op in operators}
    for mutant in all_mutants(source, operators):
        by_operator[mutant.operator].append(mutant)
    for mutants in by_operator.values():
        rng.shuffle(mutants)
    chosen: list[Mutant] = []
    while len(chosen) < n and any(by_operator.values()):
        for mutants in by_operator.values():
            if mutants and len(chosen) < n:
                chosen.append(mutants.pop())
    return chosen
