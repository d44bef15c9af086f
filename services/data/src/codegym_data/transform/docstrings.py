"""Docstring removal (comments need no transformation: ``ast.unparse`` never prints them)."""

from __future__ import annotations

import ast

from .base import Context, Transformation, is_docstring
from .scope import FUNCTIONS


class RemoveDocstrings(Transformation):
    """The docstrings of the module, its classes and functions removed (a body left empty gets ``pass``).

    Comments vanish in every transformed program, because programs are printed back from their syntax tree;
    this transformation applies to programs with at least one docstring that never read ``__doc__``.
    """

    name = "remove_docstrings"
    summary = "removes docstrings (comments vanish in every transformed program: ast.unparse drops them)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        names = {getattr(n, "attr", None) or getattr(n, "id", None) for n in ast.walk(tree)}
        if names & {"__doc__", "getdoc"}:
            return False  # the program reads docstrings
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, *FUNCTIONS)) and node.body and is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
                changed = True
        return changed
