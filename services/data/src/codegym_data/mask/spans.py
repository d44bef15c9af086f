"""The spans of a program that may be masked: statements and blocks inside function bodies, in whole lines.

A span is one of

- a *statement* of a function body, at any depth (a compound statement with everything inside it);
- a *block*: the statements of one body of a compound statement (``for ...:`` body, ``else:``, an ``except``
  handler's body, a ``case``'s body) or of the function itself (the whole body after its docstring).

A span covers whole source lines, so its text can be cut out and put back: it is a candidate only when
nothing else shares its first or last line (``if x: y`` and ``a; b`` give no span for ``y`` or ``a``) except
a trailing comment. Spans with the same lines are one (a block of one statement is that statement). Left
out: docstrings (no test can tell a fill of one from another) and ``elif`` chains as statements (their
text starts with ``elif``; the blocks inside them are spans). A span belongs to the innermost function whose
body holds it, and has metrics of its own (``metrics``).
"""

from __future__ import annotations

import ast
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from codegym_evaluator import python_syntax

from .metrics import FUNCTIONS, FunctionMetrics, Metrics, first_line, function_metrics, is_elif, measure

SpanKind = Literal["statement", "block"]


@dataclass(frozen=True)
class Span:
    """Lines ``start`` to ``end`` (1-based, both included) of a program, and what they hold."""

    function: str  # the qualified name of the function whose body holds the span
    kind: SpanKind
    node: str  # the statement's class (If, For, Return...), or for a block its owner and field (For.body)
    start: int
    end: int
    metrics: Metrics


@dataclass(frozen=True)
class FunctionSpans:
    """A function, its metrics, and the spans inside its body."""

    function: FunctionMetrics
    spans: list[Span]


def split_lines(source: str) -> list[str]:
    """The lines of ``source`` with their endings, numbered as ``ast`` numbers them (``\\n``, ``\\r\\n``, ``\\r``)."""
    return io.StringIO(source, newline="").readlines()


def function_spans(source: str) -> list[FunctionSpans]:
    """Every function of ``source`` with its candidate spans, in source order; raises ``SyntaxError``."""
    tree = python_syntax.parse(source)
    lines = split_lines(source)
    return [FunctionSpans(f, _spans(f, lines)) for f in function_metrics(tree)]


def _spans(function: FunctionMetrics, lines: Sequence[str]) -> list[Span]:
    found: dict[tuple[int, int], Span] = {}

    def add(kind: SpanKind, node: str, statements: Sequence[ast.stmt]) -> None:
        if not statements:
            return
        start, end = first_line(statements[0]), statements[-1].end_lineno or statements[0].lineno
        key = (start, end)
        if key in found or not _whole_lines(statements[0], statements[-1], lines):
            return  # a statement is added before the block it is alone in, so the statement is kept
        found[key] = Span(function.name, kind, node, start, end, measure(statements, lines=end - start + 1))

    def visit_block(owner: ast.AST, field: str, body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, FUNCTIONS):
                add("statement", type(statement).__name__, [statement])  # its body is its own function's
                continue
            if not is_elif(statement, owner):
                add("statement", type(statement).__name__, [statement])
            visit_statement(statement)
        if not (len(body) == 1 and is_elif(body[0], owner)):
            add("block", f"{type(owner).__name__}.{field}", body)

    def visit_statement(statement: ast.stmt) -> None:
        if isinstance(statement, ast.ClassDef):
            return  # a class body's methods are functions of their own; its other statements are not code to run
        for field in ("body", "orelse", "finalbody"):
            body = getattr(statement, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                visit_block(statement, field, body)
        for handler in getattr(statement, "handlers", []):
            visit_block(handler, "body", handler.body)
        for case in getattr(statement, "cases", []):
            visit_block(case, "body", case.body)

    node = function.node
    visit_block(node, "body", _without_docstring(node.body))
    return sorted(found.values(), key=lambda s: (s.start, -s.end))


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def _whole_lines(first: ast.stmt, last: ast.stmt, lines: Sequence[str]) -> bool:
    """Whether only indentation precedes ``first`` on its line and only a comment follows ``last`` on its."""
    decorators = getattr(first, "decorator_list", None) or []
    head = decorators[0] if decorators else first
    before = lines[head.lineno - 1].encode()[: head.col_offset].strip()  # ast's columns are UTF-8 byte offsets
    if decorators:
        before = before.removeprefix(b"@").strip()  # a decorator's expression starts after its @
    assert last.end_lineno is not None and last.end_col_offset is not None
    after = lines[last.end_lineno - 1].encode()[last.end_col_offset :].strip()
    return not before and (not after or after.startswith(b"#"))
