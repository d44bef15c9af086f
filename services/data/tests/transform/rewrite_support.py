"""Helpers of the transformation tests: rewrite a snippet, compare programs, run a snippet's function."""

from __future__ import annotations

import ast
import random
import textwrap
from typing import Any

from codegym_data.transform import Transformation


def rewrite(transformation: Transformation, code: str, seed: int = 0, keep: frozenset[str] = frozenset()) -> str | None:
    """``code`` (dedented) rewritten by ``transformation`` with ``random.Random(seed)``."""
    return transformation.transform_code(textwrap.dedent(code), random.Random(seed), keep)


def same_program(got: str | None, expected: str) -> bool:
    """Whether ``got`` is ``expected`` (dedented) up to layout: both printed back from their syntax trees."""
    return got is not None and ast.unparse(ast.parse(got)) == ast.unparse(ast.parse(textwrap.dedent(expected)))


def call(code: str, function: str, *args: Any) -> Any:
    """Run ``code`` (the tests' own snippets) and call its ``function`` with ``args``."""
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(code), namespace)
    return namespace[function](*args)
