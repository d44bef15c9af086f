"""The checks of a candidate that need no sandbox, and the programs the sandbox judges besides the reference.

- ``normalised``: a reference solution up to names, layout, comments and docstrings, to find duplicates.
- ``problem_words`` and ``similarity``: problem statements as word sequences, to find near-duplicates.
- ``constant_return``: a reference whose every ``return`` gives the same literal solves nothing.
- ``stand_ins``: the reference with its entry point's body replaced by ``return None`` and by ``return`` of its
  first parameter: tests that such a program passes do not test the problem.
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from collections.abc import Iterator, Sequence

from codegym_evaluator import python_syntax

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _bound_names(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.ExceptHandler)) and node.name:
            node.name = self.names.get(node.name, node.name)
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [self.names.get(n, n) for n in node.names]
        if isinstance(node, _FUNCTIONS):
            node.returns = None
        return super().generic_visit(node)


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, *_FUNCTIONS, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]


def normalised(code: str) -> str:
    """``code`` printed from its syntax tree with docstrings and annotations dropped and every name it binds
    (functions, parameters, variables) renamed ``v0``, ``v1``, ... in the order the tree holds them: two
    solutions that differ only in names, layout or comments print the same."""
    tree = python_syntax.parse(code)
    _drop_docstrings(tree)
    names: dict[str, str] = {}
    for name in _bound_names(tree):
        names.setdefault(name, f"v{len(names)}")
    return ast.unparse(_Rename(names).visit(tree))


def problem_words(text: str) -> list[str]:
    """A problem statement as its lower-case words and numbers, punctuation and layout dropped."""
    return re.findall(r"[a-z0-9]+", text.lower())


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """How alike two word sequences are, from 0 to 1 (``difflib``'s ratio: twice the matched words over all)."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() == 0 or matcher.quick_ratio() == 0:
        return 0.0
    return matcher.ratio()


def _function(tree: ast.Module, entry_point: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in tree.body:
        if isinstance(node, _FUNCTIONS) and node.name == entry_point:
            return node
    raise ValueError(f"the program defines no function {entry_point!r} at its top level")


def _own_returns(function: ast.AST) -> Iterator[ast.Return]:
    """The ``return`` statements of ``function`` itself, not of functions or lambdas defined in it."""
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, (*_FUNCTIONS, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def constant_return(solution: str, entry_point: str) -> bool:
    """Whether every ``return`` of the entry point gives the same literal (no ``return``: ``None``), so that
    the function's result depends on nothing. A generator is never constant."""
    function = _function(python_syntax.parse(solution), entry_point)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(function)):
        return False
    values = set()
    for node in _own_returns(function):
        try:
            values.add(repr(ast.literal_eval(node.value)) if node.value is not None else "None")
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return False  # computed: not a literal
    return len(values) <= 1


def stand_ins(solution: str, entry_point: str) -> dict[str, str]:
    """Programs that answer without solving, by the rejection reason each one's passing means:
    ``passes_with_none`` (the entry point returns None) and ``passes_with_identity`` (it returns its first
    parameter; left out for a function without one). Helpers and imports of the solution stay."""
    tree = python_syntax.parse(solution)
    function = _function(tree, entry_point)
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    bodies = {"passes_with_none": "return None"}
    if params:
        bodies["passes_with_identity"] = f"return {params[0]}"
    out = {}
    for reason, body in bodies.items():
        changed = copy.deepcopy(tree)
        _function(changed, entry_point).body = python_syntax.parse(body).body
        out[reason] = ast.unparse(changed)
    return out
