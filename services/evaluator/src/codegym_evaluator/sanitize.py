"""Keep what a function task needs: imports, the entry point, and the definitions it uses (transitively)."""

from __future__ import annotations

import ast


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _used_names(node: ast.AST) -> set[str]:
    """Names ``node`` reads from the module: loads, less a function's own parameters and locals."""
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        globals_ = {name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}
        loads -= local - globals_
        loads |= {d for dec in node.decorator_list for d in _used_names(dec)}
    return loads


def _is_import_block(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Try):  # try: import fast_lib / except ImportError: import slow_lib
        body = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        return all(_is_import_block(s) or isinstance(s, ast.Pass) for s in body)
    return False


def sanitize(code: str, entry_point: str) -> str:
    """``code`` without the top-level statements that ``entry_point`` does not need.

    Code that does not parse, or that does not define ``entry_point`` at top level (a function body to
    append to a prompt), is returned unchanged.

    >>> print(sanitize("import math\\ndef f(x):\\n    return g(x)\\ndef g(x):\\n    return x\\nprint(f(2))\\n", "f"))
    import math
    def f(x):
        return g(x)
    def g(x):
        return x
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    body = tree.body
    if not any(entry_point in _defined_names(n) for n in body if not isinstance(n, ast.AugAssign)):
        return code
    needed = {entry_point}
    keep: set[int] = {i for i, n in enumerate(body) if _is_import_block(n)}
    changed = True
    while changed:  # grow the set of needed definitions until it is closed under use
        changed = False
        for i, node in enumerate(body):
            if i in keep or not (_defined_names(node) & needed):
                continue
            keep.add(i)
            needed |= _used_names(node)
            changed = True
    lines = code.splitlines()
    parts = []
    for i in sorted(keep):
        node = body[i]
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        end = node.end_lineno or node.lineno
        parts.append("\n".join(lines[start - 1 : end]))
    return "\n".join(parts)
