"""What a statement or a function of a program changes of the module's names: the sanitiser keeps what fills a
name the kept code reads (``sanitize.py``), and drops what only reads.

A name changes through every other name that holds the same object: ``p = PRIMES`` then ``p.append(2)`` fills
``PRIMES``; ``m = MEMO`` in a function, a parameter whose default is ``SQ``, and ``for row in GRID`` do the same.
Read only by the name a change is written with, a right program lost its table (its filling loop went) and a wrong
one was made right (``alias.clear()`` went; round 60). A name's other names are read from how it is bound: from a
name or a part of one (``x = A``, ``x = A.table``, ``x = A[0]``, ``for x in A``), never from what a call returns.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator


def root(expr: ast.expr) -> str | None:
    """The name ``expr`` is reached from: ``X`` of ``X.a[i].b()``."""
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _part_of(expr: ast.expr | None) -> str | None:
    """The name ``expr`` is that object or a part of (``A``, ``A.table``, ``A[0]``), None where a call makes it."""
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _bound(target: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def aliases(nodes: Iterable[ast.AST]) -> dict[str, set[str]]:
    """Each name bound in ``nodes`` (their every part) to another's object or part of it, with the names it may
    hold an object of: ``x = A`` and ``for x in A`` bind ``x`` to ``A``; so does a parameter's default."""
    found: dict[str, set[str]] = {}
    for node in nodes:
        for part in ast.walk(node):
            pairs: list[tuple[list[ast.expr], ast.expr | None]] = []
            if isinstance(part, ast.Assign):
                pairs.append((part.targets, part.value))
            elif isinstance(part, (ast.AnnAssign, ast.NamedExpr)):
                pairs.append(([part.target], part.value))
            elif isinstance(part, (ast.For, ast.AsyncFor, ast.comprehension)):
                pairs.append(([part.target], part.iter))
            elif isinstance(part, ast.withitem) and part.optional_vars is not None:
                pairs.append(([part.optional_vars], part.context_expr))
            elif isinstance(part, ast.arguments):
                positional = [*part.posonlyargs, *part.args]
                defaulted = zip(positional[len(positional) - len(part.defaults) :], part.defaults, strict=True)
                keywords = zip(part.kwonlyargs, part.kw_defaults, strict=True)
                for arg, default in [*defaulted, *keywords]:
                    source = _part_of(default)
                    if source is not None and source != arg.arg:
                        found.setdefault(arg.arg, set()).add(source)
            for targets, value in pairs:
                source = _part_of(value)
                if source is not None:
                    for name in (n for t in targets for n in _bound(t) if n != source):
                        found.setdefault(name, set()).add(source)
    return found


def through(names: set[str], held: dict[str, set[str]]) -> set[str]:
    """``names`` with every name their objects may be held by (``held``: see :func:`aliases`), transitively."""
    out, todo = set(names), list(names)
    while todo:
        for other in held.get(todo.pop(), ()):
            if other not in out:
                out.add(other)
                todo.append(other)
    return out


class Groups:
    """Names that may hold one object (see :func:`aliases`), joined: a change through one is a change of them all.
    One name stands for its group (:meth:`of`), so a statement is read once whatever the length of a chain of
    names (``a1 = a0``, ``a2 = a1``, ...): the names a statement changes grow no larger for it."""

    def __init__(self, held: dict[str, set[str]]) -> None:
        self._up: dict[str, str] = {}
        for name, others in held.items():
            for other in others:
                self._up[self.of(name)] = self.of(other)

    def of(self, name: str) -> str:
        """The name that stands for ``name``'s group."""
        top = name
        while self._up.get(top, top) != top:
            top = self._up[top]
        while name != top:  # each name on the way now points at the top: later reads are short
            self._up[name], name = top, self._up[name]
        return top


def mutated(node: ast.AST) -> set[str]:
    """Module-level names ``node`` stores to or changes in place: ``X = ...`` (at top level, or under ``global X`` in
    a function), ``X.append(...)``, ``X[i] = ...``, ``del X[i]``, ``X.attr = ...``, ``X += ...``; in a function, also
    through a local name or a parameter that holds the module's object (``m = MEMO; m[i] = ...``, ``def f(out=SQ)``)."""
    declared = {name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}
    function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and (not function or n.id in declared):
            out.add(n.id)
        elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            reached = root(n)
            if reached is not None:
                out.add(reached)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            reached = root(n.func.value)
            if reached is not None:
                out.add(reached)  # a method called on it: may change it (list.append, dict.update)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # its own parameters and locals are not the module's
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        out = through(out, aliases([node])) - (local - declared)
    return out


def memoises(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The module-level tables ``function`` keeps its results in: written at a key (``MEMO[n] = ...``) and read back
    (``n in MEMO``, ``MEMO[n]``, ``MEMO.get(n)``). A call of it that changes nothing else warms a cache, as an
    ``lru_cache``'s does: a demo's call of it (``assert fib(10) == 56``, ``r = fib(int(input()))``) changed the
    program's data and was kept, and a right program failed at import (round 63)."""
    written, read, kept = set(), set(), set()
    for n in ast.walk(function):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                written.add(target.value.id)
                value = n.value if isinstance(n, (ast.Assign, ast.AugAssign)) else None
                if isinstance(n, ast.AugAssign) or _makes_a_store(value, target.value.id):
                    kept.add(target.value.id)
        if isinstance(n, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops):
            read |= {c.id for c in n.comparators if isinstance(c, ast.Name)}
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name):
            looked_up = isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
            if looked_up or getattr(n, "attr", None) == "get":
                read.add(n.value.id)
    # And it answers from it (``return MEMO[n]``): a function that fills a table it reads (a sieve's ``is_comp[i]``,
    # a graph's ``if u not in GRAPH: GRAPH[u] = []``) and answers nothing of it is no memo (round 64).
    answered = {
        n.value.id
        for r in ast.walk(function)
        if isinstance(r, ast.Return) and r.value is not None
        for n in ast.walk(r.value)
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name)
    }
    local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    return (written & read & answered) - local - kept


# Calls that make a new, empty container: a table whose values they make is the program's store, never a cache.
_CONTAINERS = {"list", "dict", "set", "defaultdict", "deque", "Counter", "OrderedDict", "bytearray"}


def _makes_a_store(value: ast.expr | None, table: str) -> bool:
    """Whether ``table[key] = value`` keeps what the program builds rather than what a call answers: a container the
    caller fills (get-or-create: ``GRAPH[u] = []``, then ``node(u).append(v)``), or a value read from the table
    itself (interning: ``IDS[name] = len(IDS)``). Such a function's calls at import fill the program's data, and
    they went as a memo's demos (round 64: right programs failed)."""
    if value is None:
        return False
    displays = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
    for part in ast.walk(value):
        if isinstance(part, displays) or (isinstance(part, ast.Name) and part.id == table):
            return True
        if isinstance(part, ast.Call):
            callee = part.func.id if isinstance(part.func, ast.Name) else getattr(part.func, "attr", "")
            if callee in _CONTAINERS:
                return True
    return False


def caches(body: list[ast.stmt], of: Callable[[str], str]) -> dict[str, set[str]]:
    """Each top-level function's memo tables (:func:`memoises`) that no other definition names (``of``: a name's
    group, see :class:`Groups`): a table another function reads (``GRAPH.get(u)``, ``IDS.get(name)``) is the
    program's data, and the calls that fill it are set-up, not a cache's warming (round 64)."""
    # Each function by its name as ``sanitize`` reads them (the last definition of a name); every definition reads.
    functions = {node.name: node for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    memos = {name: memoises(node) for name, node in functions.items()}
    tables = {of(t) for found in memos.values() for t in found}
    if not tables:
        return memos
    elsewhere: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own = {of(t) for t in memos[node.name]} if functions.get(node.name) is node else set()
            elsewhere |= {of(n.id) for n in ast.walk(node) if isinstance(n, ast.Name)} & tables - own
    return {name: {t for t in found if of(t) not in elsewhere} for name, found in memos.items()}


# Names and attributes through which a statement may bind a module's names without naming them (a frame's
# ``f_globals``: ``sys._getframe().f_globals['f'] = g``; round 66).
_DYNAMIC = {"exec", "eval", "globals", "vars", "locals", "setattr", "delattr", "__import__"}
_DYNAMIC_ATTRS = {"modules", "__dict__", "__globals__", "__builtins__", "f_globals", "f_locals", "f_builtins"}


def at_import(node: ast.AST) -> Iterator[ast.AST]:
    """Every part of ``node`` that runs when it does: all of it but the bodies of the functions it defines."""
    stack = [node]
    while stack:
        part = stack.pop()
        yield part
        for field, value in ast.iter_fields(part):
            if field == "body" and isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            stack.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, ast.AST))


def _dynamic(part: ast.AST) -> bool:
    return (isinstance(part, ast.Name) and part.id in _DYNAMIC) or (
        isinstance(part, ast.Attribute) and part.attr in _DYNAMIC_ATTRS
    )


def binds(node: ast.AST, names: set[str], rebinders: set[str]) -> bool:
    """Whether ``node``, run at import, may bind one of ``names``: a store or a deletion, a definition, an
    import, an exception's name, a walrus, a dynamic binding (``exec``, ``globals()``, ``sys.modules``), or a
    call of one of the program's functions that does (``rebinders``)."""
    for part in at_import(node):
        if _dynamic(part):
            return True
        if isinstance(part, ast.Name) and isinstance(part.ctx, (ast.Store, ast.Del)) and part.id in names:
            return True
        if isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and part.name in names:
            return True
        if isinstance(part, ast.alias) and (part.asname or part.name).split(".")[0] in names:
            return True
        if isinstance(part, ast.ExceptHandler) and part.name in names:
            return True
        if isinstance(part, (ast.MatchAs, ast.MatchStar)) and part.name in names:  # ``case f:`` binds ``f``
            return True
        if isinstance(part, ast.MatchMapping) and part.rest in names:
            return True
        if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id in rebinders:
            return True
    return False


def rebinders(body: list[ast.stmt], names: set[str]) -> set[str]:
    """The program's functions that bind one of ``names`` when called (``global``, or dynamically): wherever they
    are defined, a class's body or an ``if`` block too, which run at import and may call them (round 66). Each
    function holding such a binding and every function around it, found by walking up from the binding once: a
    walk of each function's own tree read a body nested 95 functions deep 95 times (5.5 s for 244 KiB)."""
    found: set[str] = set()
    for top in body:
        parents: dict[int, ast.AST] = {}
        hits: list[ast.AST] = []
        stack: list[ast.AST] = [top]
        while stack:
            node = stack.pop()
            if _dynamic(node) or (isinstance(node, ast.Global) and set(node.names) & names):
                hits.append(node)
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
                stack.append(child)
        seen: set[int] = set()  # a node walked up from already: what is around it is found
        for hit in hits:
            up = parents.get(id(hit))
            while up is not None and id(up) not in seen:
                seen.add(id(up))
                if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.add(up.name)
                up = parents.get(id(up))
    return found
