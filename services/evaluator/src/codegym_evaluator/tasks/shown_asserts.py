"""The asserts of a one-test assert task that a model may see: the first few, the rest kept hidden.

HumanEval's tests are one test, ``check(candidate)`` holding every assert, and a task with one test showed all of
it: a later turn of a repair, shown every assert that then judged it, could fit them (``if (a, b) == (1, 2):
return 3``) and be paid in full. The test is cut instead: what it sets up, its first asserts, none of the rest.
"""

from __future__ import annotations

import ast

from codegym_evaluator import python_syntax


def first_asserts(code: str, count: int) -> str | None:
    """``code`` with only its first ``count`` statements that assert (at its top level, or in the body of a
    function it defines, such as ``check``; a loop of asserts is one), and what they need kept; None where fewer
    than ``count + 1`` such statements would leave none hidden, where the shown ones need something the hidden
    ones read (a table of expected values both index: shown whole, it would hold the hidden answers), or the code
    does not parse."""
    try:
        tree = python_syntax.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    bodies = [tree.body] + [
        node.body for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    asserting = [(body, stmt) for body, _, stmt in checks(tree)]
    if count < 1 or len(asserting) <= count:
        return None
    # A function that checks nothing (a helper) is kept or dropped whole; one that checks (``check``) is cut.
    checking = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    checking = [node for node in checking if any(_asserts(stmt) for stmt in node.body)]
    cut_bodies, cut = [tree.body, *(node.body for node in checking)], {id(node) for node in checking}
    hidden = [stmt for _, stmt in asserting[count:]]
    # What the hidden asserts need, in turn (a table of their expected values, what fills it): shown, it would
    # show their answers.
    secret = _needed(cut_bodies, hidden, cut)
    for body, stmt in asserting[count:]:
        body.remove(stmt)
    # Nothing shown may bind what the hidden ones read: no statement kept (an import holds no answer), no shown
    # assert (``(t := [...])[0]``), and no part of a cut function's own line (a parameter's default, a decorator
    # that passes one): each would show the hidden answers. Of a cut function's parameters the hidden asserts
    # may read the first alone, the candidate its caller passes (``check(candidate)``). A module's function
    # called (``math.isclose(...)``) changes no module.
    imports = [stmt for body in cut_bodies for stmt in body if isinstance(stmt, (ast.Import, ast.ImportFrom))]
    modules = {name for stmt in imports for name in _writes(stmt)}
    shown = [stmt for stmt in _prune(cut_bodies, cut) if not isinstance(stmt, (ast.Import, ast.ImportFrom))]
    if any(_writes(stmt, modules) & secret for stmt in shown) or any(_signature(f) & secret for f in checking):
        return None
    for body in bodies:
        if not body:
            body.append(ast.Pass())
    return ast.unparse(tree) + "\n"


def checks(tree: ast.Module) -> list[tuple[list[ast.stmt], ast.FunctionDef | ast.AsyncFunctionDef | None, ast.stmt]]:
    """The statements of ``tree`` that assert, in the order :func:`first_asserts` counts them: those at its top
    level, then those in the body of each function it defines, in turn (a loop of asserts is one); each with the
    body that holds it and that body's function (None at the top level)."""
    functions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    owned: list[tuple[list[ast.stmt], ast.FunctionDef | ast.AsyncFunctionDef | None]] = [(tree.body, None)]
    owned += [(node.body, node) for node in functions]
    return [(body, owner, stmt) for body, owner in owned for stmt in body if _asserts(stmt)]


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a cut function's own line binds that its caller's first argument does not: every parameter of a
    function with a decorator (which may pass it anything), else every parameter but the first, and the first too
    where it has a default (its value is then shown)."""
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    if function.decorator_list:
        return set(names)
    positional = [*args.posonlyargs, *args.args]
    first_defaulted = bool(positional) and len(args.defaults) == len(positional)
    return set(names[1:]) | ({names[0]} if names and first_defaulted else set())


def _prune(bodies: list[list[ast.stmt]], cut: set[int]) -> list[ast.stmt]:
    """Keep in ``bodies`` only what the shown asserts need: themselves, the calls that run them (``check(add)``),
    and what binds or changes a name they read, in turn. The rest goes: the tables, expected values and reference
    functions only the hidden asserts read, and what merely shows them (``print(CASES)``, ``cases.append(...)``).
    What is kept, in order."""
    functions = {stmt.name for stmt in bodies[0] if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
    statements = [stmt for body in bodies for stmt in body]
    kept = _closure(statements, [s for s in statements if _asserts(s) or _runs(s, functions)], cut)[0]
    for body in bodies:
        body[:] = [stmt for stmt in body if id(stmt) in kept]
    return [stmt for stmt in statements if id(stmt) in kept]


def _needed(bodies: list[list[ast.stmt]], roots: list[ast.stmt], cut: set[int]) -> set[str]:
    """The names ``roots`` read, and those read by what binds or changes them, in turn."""
    return _closure([stmt for body in bodies for stmt in body], roots, cut)[1]


def _closure(statements: list[ast.stmt], roots: list[ast.stmt], cut: set[int]) -> tuple[set[int], set[str]]:
    """``roots`` and every statement of ``statements`` that binds or changes a name they read, in turn (their
    ids), and the names read."""
    kept = {id(stmt) for stmt in roots}
    needed = {name for stmt in roots for name in _reads(stmt, cut)}
    grown = True
    while grown:
        grown = False
        for stmt in statements:
            if id(stmt) not in kept and _writes(stmt) & needed:
                kept.add(id(stmt))
                needed |= _reads(stmt, cut)
                grown = True
    return kept, needed


def _runs(stmt: ast.stmt, functions: set[str]) -> bool:
    """Whether ``stmt`` is a call of one of the tests' own functions (HumanEval's ``check(candidate)``)."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in functions


def _writes(stmt: ast.stmt, modules: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """The names ``stmt`` binds, or changes in place (``cases.append(...)``, ``table[k] = v``); a method called on
    one of ``modules`` is a module's function, which changes nothing."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            out |= _root(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            out |= _root(node.func.value) - modules
    return out


def _root(expr: ast.expr) -> set[str]:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return {expr.id} if isinstance(expr, ast.Name) else set()


def _reads(stmt: ast.stmt, cut: set[int]) -> set[str]:
    """The names ``stmt`` reads; a function's that is cut (``cut``), those its decorators and defaults read (its
    body's statements are weighed one by one)."""
    parts: list[ast.AST] = [stmt]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(stmt) in cut:
        parts = [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
    return {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _asserts(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` checks anything (an ``assert``, or a ``raise``, in it), not counting a function it defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(node, (ast.Assert, ast.Raise)) for node in ast.walk(stmt))
