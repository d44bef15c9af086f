"""What a completion's call names: the module path it reaches from an import, and whether it ends the process or
runs the completion's own tests (``sanitize``), read from the names it is written with, never its printed text.
"""

from __future__ import annotations

import ast

# Calls into these do not set anything up: they end the process, or run the model's own tests.
ENDS_OR_TESTS = ("sys.exit", "os._exit", "os.abort", "unittest", "doctest", "pytest")


def qualified(expr: ast.expr, imports: dict[str, str]) -> str | None:
    """The module path ``expr`` reaches from an imported name (``decimal.getcontext().prec`` ->
    ``decimal.getcontext.prec``), or None when it starts anywhere else."""
    parts: list[str] = []
    while not isinstance(expr, ast.Name):
        if isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        else:
            return None
    root = imports.get(expr.id)
    return ".".join([root, *reversed(parts)]) if root is not None else None


_NAME_DEPTH = 32  # the parts of a callee's name read at most: ``unittest.TestCase().run`` is four


def calls_end(call: ast.Call) -> bool:
    """A call that ends the process or runs tests (by the name it is written with: ``sys.exit``,
    ``unittest.main``, ``unittest.TestCase().run``)."""
    name, whole = callee_name(call.func)
    return bool(name) and (
        (whole and (name in ENDS_OR_TESTS or name in ("exit", "quit", "input")))
        or any(name.startswith(p + ".") for p in ENDS_OR_TESTS)
    )


def callee_name(func: ast.expr) -> tuple[str, bool]:
    """The dotted name ``func`` is written from (``a.b`` of ``a.b().c``; empty where it starts with no name), and
    whether that is all of it. Its text (``ast.unparse``) was read instead, for every call of a chain ``f()()()``
    or of a call on a large literal: quadratic, 40 s for 200 KB (round 57). Walked to its root for every call of a
    chain, it was quadratic still (a chain of 2,900 calls, 45 times: 22 s; round 58): a callee written from more
    than ``_NAME_DEPTH`` parts is no name (the calls of its chain nearer its root are read, each its own)."""
    wrappers: list[ast.expr] = []
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        if len(wrappers) == _NAME_DEPTH:
            return "", False
        wrappers.append(func)
        func = func.func if isinstance(func, ast.Call) else func.value
    if not isinstance(func, ast.Name):
        return "", False
    parts = [func.id]
    for wrapper in reversed(wrappers):
        if not isinstance(wrapper, ast.Attribute):
            return ".".join(parts), False
        parts.append(wrapper.attr)
    return ".".join(parts), True


def within(qualified: str, prefixes: tuple[str, ...]) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)
