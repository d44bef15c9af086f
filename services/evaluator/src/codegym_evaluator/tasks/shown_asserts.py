"""The asserts of a one-test assert task that a model may see: the first few, the rest kept hidden.

HumanEval's tests are one test, ``check(candidate)`` holding every assert, and a task with one test showed all of
it: a later turn of a repair, shown every assert that then judged it, could fit them (``if (a, b) == (1, 2):
return 3``) and be paid in full. The test is cut instead: what it sets up, its first asserts, none of the rest.
"""

from __future__ import annotations

import ast


def first_asserts(code: str, count: int) -> str | None:
    """``code`` with only its first ``count`` statements that assert (at its top level, or in the body of a
    function it defines, such as ``check``; a loop of asserts is one), and every other statement kept; None where
    fewer than ``count + 1`` such statements would leave none hidden, or the code does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    bodies = [tree.body] + [
        node.body for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    asserting = [(body, stmt) for body in bodies for stmt in body if _asserts(stmt)]
    if count < 1 or len(asserting) <= count:
        return None
    for body, stmt in asserting[count:]:
        body.remove(stmt)
        if not body:
            body.append(ast.Pass())
    return ast.unparse(tree) + "\n"


def _asserts(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` asserts anything (an ``assert``, or one inside it), not counting a function it defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))
