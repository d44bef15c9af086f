"""Semantics-preserving rewrites of Python programs, on ``ast``: one ``Transformation`` base class, composable
and seeded. ``TRANSFORMATIONS`` names them; ``codegym_data.verify`` checks their output in the sandbox."""

from __future__ import annotations

from .base import Compose, Context, Transformation, TransformError, row_rng
from .branches import InvertIf
from .comprehensions import ComprehensionToLoop, LoopToComprehension
from .dead_code import InsertDeadCode
from .docstrings import RemoveDocstrings
from .loops import ForToWhile, WhileToFor
from .registry import TRANSFORMATIONS, UnknownTransformation, get_transformation, parse_transformations
from .rename import Rename
from .reorder import ReorderStatements

__all__ = [
    "TRANSFORMATIONS",
    "Compose",
    "ComprehensionToLoop",
    "Context",
    "ForToWhile",
    "InsertDeadCode",
    "InvertIf",
    "LoopToComprehension",
    "RemoveDocstrings",
    "Rename",
    "ReorderStatements",
    "TransformError",
    "Transformation",
    "UnknownTransformation",
    "WhileToFor",
    "get_transformation",
    "parse_transformations",
    "row_rng",
]
