"""Complexity metrics of Python code, computed from its ``ast`` alone: of a whole function, or of a span of
statements inside one (``spans``).

- ``cyclomatic``: McCabe's cyclomatic complexity, 1 + the decision points in the code. A decision point is an
  ``if`` or ``elif``, a conditional expression (``a if c else b``), a ``for``/``async for`` or ``while`` loop, a
  comprehension's ``for`` clause and each of its ``if`` clauses, each boolean operator (``a and b or c`` has
  two), each ``except`` handler, and each ``case`` of a ``match`` except a last catch-all without a guard
  (``case _:`` or ``case name:``, the path taken when no other case matches, as ``else`` is). Loop ``else``,
  ``finally``, ``with`` and ``assert`` are not decisions. Nested functions and lambdas are part of the code
  that holds them, so their decisions count there too (a nested function also has metrics of its own).
- ``halstead_volume``: Halstead's volume ``N * log2(n)``, where ``N`` counts every operator and operand
  occurrence and ``n`` the distinct ones (``Halstead`` has the four counts). Operands are identifiers and
  literals, told apart by their text: a name (``Name``), a literal (``Constant``, by its ``repr``, so ``1``,
  ``1.0`` and ``'1'`` differ), a parameter, an attribute's name (``b`` in ``a.b``), a keyword argument's name,
  an imported name and its alias, the name of a nested ``def`` or ``class``, the names of ``global`` and
  ``nonlocal``, an ``except ... as`` name and the names a ``match`` pattern binds. Operators are the
  operator symbols, by symbol (``+``, ``and``, ``not in``, ``+=``; a boolean operation of k operands counts
  k - 1, a chained comparison one per comparison), ``=`` once per target of an assignment, and every other
  node of the tree once, by its class name (``If``, ``For``, ``Return``, ``Call``, ``Subscript``,
  ``Attribute``, ``List``, ``comprehension``, ``ExceptHandler``, ``match_case``...), except those that carry
  no token of their own: ``Module``, ``Expr`` (an expression used as a statement), ``arguments``,
  ``keyword``, ``alias``, ``withitem``, the load/store/delete contexts, and the nodes of a binary, unary,
  boolean, comparison or augmented-assignment operation, whose symbol is the operator.
- ``nesting_depth``: the most control blocks a statement sits in: ``if`` (an ``elif`` is at the depth of its
  ``if``), ``for``, ``while``, ``with``, ``try`` (its handlers, ``else`` and ``finally`` included) and
  ``match`` (with its cases: one level). A nested ``def`` or ``class`` adds no level. Straight-line code is 0.
- ``lines``: source lines from the first (a decorator's, if any) to the last, both included.
- ``statements``: statement nodes at any depth (a compound statement and each statement inside it).

Of a function, every metric is of the whole definition (its header included) but ``statements``, which counts
the statements of its body; of a span, every metric is of its statements.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from codegym_evaluator import python_syntax

METRICS: tuple[str, ...] = ("cyclomatic", "halstead_volume", "nesting_depth", "lines", "statements")

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.MatMult: "@",
    ast.Div: "/",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.FloorDiv: "//",
    ast.Invert: "~",
    ast.Not: "not",
    ast.UAdd: "+",
    ast.USub: "-",
    ast.And: "and",
    ast.Or: "or",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}

# Nodes that spell no token of their own (or whose token is their operator symbol, counted apart).
_SILENT = (
    ast.Module,
    ast.Expr,
    ast.arguments,
    ast.keyword,
    ast.alias,
    ast.withitem,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.AugAssign,
    ast.Assign,
    ast.Name,
    ast.Constant,
    ast.arg,
)

_CONTROL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
_TRY_STAR = tuple(t for t in (getattr(ast, "TryStar", None),) if isinstance(t, type))  # Python 3.11+


@dataclass(frozen=True)
class Halstead:
    """Halstead's counts: distinct operators and operands (``n1``, ``n2``), their occurrences (``N1``, ``N2``)."""

    n1: int
    n2: int
    N1: int  # Halstead's own names
    N2: int

    @property
    def vocabulary(self) -> int:
        return self.n1 + self.n2

    @property
    def length(self) -> int:
        return self.N1 + self.N2

    @property
    def volume(self) -> float:
        """``length * log2(vocabulary)``; 0 for empty code."""
        return self.length * math.log2(self.vocabulary) if self.vocabulary else 0.0


@dataclass(frozen=True)
class Metrics:
    """The metrics of one function or span (see the module's docstring for what each counts)."""

    cyclomatic: int
    halstead_volume: float
    nesting_depth: int
    lines: int
    statements: int
    halstead: Halstead

    def value(self, name: str) -> float:
        """The metric called ``name`` (one of ``METRICS``)."""
        if name not in METRICS:
            raise KeyError(name)
        return float(getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["halstead_volume"] = round(self.halstead_volume, 3)
        return data


@dataclass(frozen=True)
class FunctionMetrics:
    """A function (or method) of a program, by its qualified name (``Outer.method``, ``f.<locals>.g``)."""

    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    metrics: Metrics


def measure(nodes: Sequence[ast.AST], lines: int | None = None) -> Metrics:
    """The metrics of ``nodes`` (a function definition, or consecutive statements); ``lines`` when the caller
    knows them better than the nodes' positions do."""
    if lines is None:
        first = min(first_line(n) for n in nodes)
        last = max(getattr(n, "end_lineno", None) or first_line(n) for n in nodes)
        lines = last - first + 1
    halstead = halstead_counts(nodes)
    return Metrics(
        cyclomatic=cyclomatic(nodes),
        halstead_volume=halstead.volume,
        nesting_depth=max((nesting_depth(n) for n in nodes), default=0),
        lines=lines,
        statements=sum(1 for n in nodes for inner in ast.walk(n) if isinstance(inner, ast.stmt)),
        halstead=halstead,
    )


def function_metrics(source: str | ast.Module) -> list[FunctionMetrics]:
    """Every function and method of a program, outer ones first, with its metrics."""
    tree = python_syntax.parse(source) if isinstance(source, str) else source
    found: list[FunctionMetrics] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FUNCTIONS):
                name = prefix + child.name
                metrics = measure([child])
                # the def is not a statement of its own body
                found.append(FunctionMetrics(name, child, replace(metrics, statements=metrics.statements - 1)))
                visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def cyclomatic(nodes: Iterable[ast.AST]) -> int:
    """1 + the decision points in ``nodes``."""
    decisions = 0
    for node in _walk(nodes):
        if isinstance(node, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)):
            decisions += 1
        elif isinstance(node, ast.comprehension):
            decisions += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            decisions += len(node.values) - 1
        elif isinstance(node, ast.Match):
            last = node.cases[-1]
            catch_all = last.guard is None and isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
            decisions += len(node.cases) - catch_all
    return 1 + decisions


def halstead_counts(nodes: Iterable[ast.AST]) -> Halstead:
    """Operators and operands of ``nodes``, counted as the module's docstring says."""
    operators: Counter[str] = Counter()
    operands: Counter[str] = Counter()
    for node in _walk(nodes):
        operands.update(_operands(node))
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            operators[_SYMBOLS[type(node.op)]] += 1
        elif isinstance(node, ast.BoolOp):
            operators[_SYMBOLS[type(node.op)]] += len(node.values) - 1
        elif isinstance(node, ast.Compare):
            operators.update(_SYMBOLS[type(op)] for op in node.ops)
        elif isinstance(node, ast.AugAssign):
            operators[_SYMBOLS[type(node.op)] + "="] += 1
        elif isinstance(node, ast.Assign):
            operators["="] += len(node.targets)
        elif not isinstance(node, _SILENT):
            operators[type(node).__name__] += 1
    return Halstead(len(operators), len(operands), sum(operators.values()), sum(operands.values()))


def nesting_depth(node: ast.AST) -> int:
    """The most control blocks (``if``, loops, ``with``, ``try``, ``match``) any statement in ``node`` sits in,
    counting ``node`` itself when it is one."""

    def depth(node: ast.AST, parent: ast.AST | None) -> int:
        inner = max((depth(child, node) for child in ast.iter_child_nodes(node)), default=0)
        if isinstance(node, (*_CONTROL, *_TRY_STAR)) and not is_elif(node, parent):
            return 1 + inner
        return inner

    return depth(node, None)


def is_elif(node: ast.AST, parent: ast.AST | None) -> bool:
    """Whether ``node`` is the ``elif`` of ``parent``: the ``If`` alone in an ``If``'s ``else``, at the column
    of its ``if`` (an ``if`` inside an ``else:`` block is indented further)."""
    return (
        isinstance(node, ast.If)
        and isinstance(parent, ast.If)
        and parent.orelse == [node]
        and node.col_offset == parent.col_offset
    )


def _walk(nodes: Iterable[ast.AST]) -> Iterable[ast.AST]:
    for node in nodes:
        yield from ast.walk(node)


def first_line(node: ast.AST) -> int:
    """The first line of ``node``, its decorators' included."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", None) or []
    line: int = getattr(node, "lineno", 1)
    return min([line, *(d.lineno for d in decorators)])


def _operands(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Constant):
        return [repr(node.value)]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg is not None else []
    if isinstance(node, ast.alias):
        return [node.name, *([node.asname] if node.asname else [])]
    if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, ast.MatchClass):
        return list(node.kwd_attrs)
    return []
