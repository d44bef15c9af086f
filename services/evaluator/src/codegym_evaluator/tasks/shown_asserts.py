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
    _prune(bodies)
    for body in bodies:
        if not body:
            body.append(ast.Pass())
    return ast.unparse(tree) + "\n"


def _prune(bodies: list[list[ast.stmt]]) -> None:
    """Drop from ``bodies`` what binds names nothing kept reads: the data tables, expected values and reference
    functions only the hidden asserts used, which would show them (every case's input and answer, the oracle)."""
    binding = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    candidates = [(body, stmt) for body in bodies for stmt in body if isinstance(stmt, binding)]
    kept = [stmt for body in bodies for stmt in body if not isinstance(stmt, binding)]
    needed = {name for stmt in kept for name in _reads(stmt)}
    chosen: set[int] = set()
    grown = True
    while grown:
        grown = False
        for _, stmt in candidates:
            if id(stmt) not in chosen and _binds(stmt) & needed:
                chosen.add(id(stmt))
                needed |= _reads(stmt)
                grown = True
    for body, stmt in candidates:
        if id(stmt) not in chosen:
            body.remove(stmt)


def _binds(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]  # type: ignore[attr-defined]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _reads(stmt: ast.stmt) -> set[str]:
    """The names ``stmt`` reads (a function's: those its defaults and decorators read; its body's statements are
    weighed one by one where they are in ``bodies``, and read whole where they are not)."""
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _asserts(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` asserts anything (an ``assert``, or one inside it), not counting a function it defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))
