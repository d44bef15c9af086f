"""The ``Transformation`` base class, ``Compose``, and the statement blocks transformations rewrite.

A transformation parses a program with ``ast``, rewrites the tree, and prints it back with ``ast.unparse``.
Printing drops every comment and normalises layout and quoting whatever the rewrite was, so a transformed
program never has comments; a transformation *applies* only when it changed the tree, not the layout.
"""

from __future__ import annotations

import ast
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from codegym_evaluator import python_syntax
from codegym_evaluator.tasks import Task

from .. import solutions
from .scope import FUNCTIONS, AnyFunction, FreshNames


class TransformError(Exception):
    """A transformation produced a program that does not compile: a bug in the transformation, not in the row."""


@dataclass
class Context:
    """What a rewrite may use: the row's random generator, the names to keep, and a source of fresh names."""

    rng: random.Random
    keep: frozenset[str]  # names the tests use from outside (the entry point among them): never renamed or reused
    fresh: FreshNames


@dataclass
class Block:
    """One list of statements (a body, an ``else``, a handler...) and where it runs."""

    body: list[ast.stmt]
    function: AnyFunction | None  # the function whose code it is; None at module level and in class bodies
    class_body: bool  # the body of a class itself: its bindings are attributes
    guarded: bool  # inside a ``try`` or ``with`` of the same function, where a raised error may be caught


def blocks(tree: ast.Module) -> list[Block]:
    """Every statement list of ``tree``, inner ones before the ones that hold them."""
    found: list[Block] = []

    def visit(node: ast.AST, function: AnyFunction | None, guarded: bool) -> None:
        for field, value in ast.iter_fields(node):
            if not isinstance(value, list):
                if isinstance(value, ast.AST):
                    visit(value, function, guarded)
                continue
            inner_function, inner_guarded, class_body = function, guarded, False
            if isinstance(node, FUNCTIONS) and field == "body":
                inner_function, inner_guarded = node, False
            elif isinstance(node, ast.ClassDef) and field == "body":
                inner_function, inner_guarded, class_body = None, False, True
            elif isinstance(node, (ast.Try, ast.With, ast.AsyncWith)) or type(node).__name__ == "TryStar":
                inner_guarded = True  # a handler, or a context manager such as contextlib.suppress
            for item in value:
                if isinstance(item, ast.AST):
                    visit(item, inner_function, inner_guarded)
            if value and all(isinstance(v, ast.stmt) for v in value):
                found.append(Block(value, inner_function, class_body, inner_guarded))

    visit(tree, None, False)
    return found


def is_docstring(statement: ast.stmt) -> bool:
    """A string literal standing alone as a statement (the first one of a body is its docstring)."""
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def row_rng(seed: int, name: str, task_id: str) -> random.Random:
    """The random generator of one row under one transformation: the same whatever else is in the dataset."""
    return random.Random(f"{seed}/{name}/{task_id}")


class Transformation(ABC):
    """A semantics-preserving rewrite of Python programs.

    Subclasses set ``name`` and ``summary`` and implement ``rewrite``. ``transform_code`` is the rewrite of one
    program; ``apply`` the rewrite of a dataset's reference solutions.
    """

    name: str
    summary: str  # what it does and when it does not apply, one line for ``codegym-data transform --list``

    @abstractmethod
    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        """Rewrite ``tree`` in place; False when nothing in it qualifies (then it must be left unchanged)."""

    def transform_code(self, code: str, rng: random.Random, keep: frozenset[str] = frozenset()) -> str | None:
        """``code`` rewritten, or None when the transformation does not apply (or ``code`` does not parse).

        ``keep``: names the program must keep meaning the same thing (the entry point, names its tests use).
        """
        try:
            tree = python_syntax.parse(code)
        except (SyntaxError, ValueError):
            return None
        if not self.rewrite(tree, Context(rng, keep, FreshNames(tree, keep))):
            return None
        ast.fix_missing_locations(tree)
        out = ast.unparse(tree)
        try:
            compile(out, f"<{self.name}>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise TransformError(f"{self.name} produced a program that does not compile: {exc}") from None
        return out + "\n"

    def apply(self, tasks: Iterable[Task], seed: int = 0) -> list[Task]:
        """New tasks for those whose reference solution this transformation rewrote (not yet verified).

        Each is the task with its ``canonical_solution`` replaced by the rewritten program and the id
        ``<task_id>#<name>``; ``codegym_data.verify`` keeps those that still pass their tests.
        """
        out: list[Task] = []
        for task in tasks:
            ref = solutions.reference(task)
            if ref is None:
                continue
            code = self.transform_code(ref.source, row_rng(seed, self.name, task.task_id), ref.keep)
            if code is not None:
                out.append(solutions.transformed(task, code, self.name, seed))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Compose(Transformation):
    """Several transformations applied in order to the same program; it applies when any of them did."""

    summary = "the given transformations one after another"

    def __init__(self, steps: Sequence[Transformation]) -> None:
        if not steps:
            raise ValueError("Compose needs at least one transformation")
        self.steps = list(steps)
        self.name = "+".join(step.name for step in self.steps)

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = [step.rewrite(tree, ctx) for step in self.steps]  # every step, not just up to the first
        return any(changed)

    def __repr__(self) -> str:
        return f"Compose({self.steps!r})"
