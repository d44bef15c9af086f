"""Docstring removal (comments need no transformation: ``ast.unparse`` never prints them)."""

from __future__ import annotations

import ast

from .base import Context, Transformation, is_docstring
from .scope import FUNCTIONS


class RemoveDocstrings(Transformation):
    """The docstrings of the module, its classes and functions removed (a body left empty gets ``pass``).

    Comments vanish in every transformed program, because programs are printed back from their syntax tree;
    this transformation applies to programs with at least one docstring. It changes ``__doc__``, which no
    solution's behaviour should depend on (verification drops a row whose does).
    """

    name = "remove_docstrings"
    summary = "removes docstrings (comments vanish in every transformed program: ast.unparse drops them)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, *FUNCTIONS)) and node.body and is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
                changed = True
        return changed
