"""Python's scoping rules over an ``ast`` tree: what a scope binds, where a name occurs, fresh names.

A scope is a module, a function, a lambda, a class body or a comprehension. The code *of* a scope is what runs
in it: a nested function's decorators, defaults and annotations run in the enclosing scope, its body does not;
a comprehension's first iterable runs in the enclosing scope, the rest does not; and an assignment expression
(``:=``) inside a comprehension binds in the enclosing function.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import random
from collections.abc import Iterable, Iterator

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef, *COMPREHENSIONS)

# Calls that read or write a scope's variables by name: renaming beside them cannot be proved safe.
DYNAMIC_NAMES = frozenset({"locals", "vars", "eval", "exec", "globals", "dir", "__import__", "compile"})
DYNAMIC_ATTRIBUTES = frozenset({"f_locals", "f_globals", "currentframe", "_getframe", "__dict__"})

AnyFunction = ast.FunctionDef | ast.AsyncFunctionDef


def scope_code(node: ast.AST) -> Iterator[ast.AST]:
    """Every node that runs in ``node``'s own scope (``node`` a scope or a module), nested scopes' headers included."""
    if isinstance(node, COMPREHENSIONS):
        # The first iterable runs in the enclosing scope; the targets, conditions and later iterables here.
        roots: list[ast.AST] = [part for g in node.generators for part in (g.target, *g.ifs)]
        roots += [g.iter for g in node.generators[1:]]
        roots += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    elif isinstance(node, ast.Lambda):
        roots = [node.body]
    elif isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Module)):
        roots = list(node.body)
    else:
        raise TypeError(f"not a scope: {type(node).__name__}")
    stack = list(reversed(roots))
    while stack:
        child = stack.pop()
        yield child
        stack.extend(reversed(_same_scope_children(child)))


def _same_scope_children(node: ast.AST) -> list[ast.AST]:
    """The children of ``node`` that run in the scope ``node`` itself runs in."""
    if isinstance(node, FUNCTIONS):
        return [*node.decorator_list, *_argument_headers(node.args), *([node.returns] if node.returns else [])]
    if isinstance(node, ast.Lambda):
        return _argument_headers(node.args)
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    if isinstance(node, COMPREHENSIONS):
        return [node.generators[0].iter]
    return list(ast.iter_child_nodes(node))


def _argument_headers(args: ast.arguments) -> list[ast.AST]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    annotations = [a.annotation for a in every if a is not None and a.annotation is not None]
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None), *annotations]


def parameters(node: AnyFunction | ast.Lambda) -> set[str]:
    """The names of a function's parameters."""
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def comprehension_targets(node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> set[str]:
    """The names a comprehension's ``for`` clauses bind (in the comprehension's own scope)."""
    return {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}


def bound_by(node: ast.AST) -> set[str]:
    """The names one node binds in the scope it runs in (not counting what its children bind)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return set(node.names)
    return set()


def bindings(scope: ast.AST) -> list[tuple[str, ast.AST]]:
    """Every (name, node) that binds a name in ``scope`` (a function's parameters first), in source order."""
    found: list[tuple[str, ast.AST]] = []
    if isinstance(scope, (*FUNCTIONS, ast.Lambda)):
        found += [(p, scope.args) for p in sorted(parameters(scope))]
    if isinstance(scope, COMPREHENSIONS):
        found += [(n, scope) for n in sorted(comprehension_targets(scope))]
    for node in scope_code(scope):
        found += [(name, node) for name in bound_by(node)]
        if isinstance(node, COMPREHENSIONS) and not isinstance(scope, COMPREHENSIONS):
            found += [(w.target.id, w) for w in _walrus_in(node)]
    return found


def bound_names(scope: ast.AST) -> set[str]:
    """The names ``scope`` binds (locals of a function, attributes of a class body, globals of a module)."""
    return {name for name, _ in bindings(scope)}


def _walrus_in(comprehension: ast.AST) -> Iterator[ast.NamedExpr]:
    """Assignment expressions in a comprehension (and comprehensions inside it): they bind outside it."""
    stack = list(ast.iter_child_nodes(comprehension))
    while stack:
        child = stack.pop()
        if isinstance(child, ast.NamedExpr) and isinstance(child.target, ast.Name):
            yield child
        if not isinstance(child, (*FUNCTIONS, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(child))


def declared(node: ast.AST) -> set[str]:
    """Names declared ``global`` or ``nonlocal`` anywhere under ``node``."""
    return {n for d in ast.walk(node) if isinstance(d, (ast.Global, ast.Nonlocal)) for n in d.names}


def names_in(node: ast.AST) -> set[str]:
    """Every variable name under ``node``, in any scope: loads, stores, parameters, definitions, imports."""
    found: set[str] = set()
    for child in ast.walk(node):
        found |= bound_by(child)
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.arg):
            found.add(child.arg)
    return found


def references(scope: ast.AST, name: str, *, nested: bool = True) -> list[ast.AST]:
    """The nodes of ``scope`` that mean its variable ``name``: loads, stores and other bindings.

    With ``nested``, also those in nested scopes that see it (that do not bind ``name`` themselves). A class body
    is searched even when it binds ``name`` (its methods see the enclosing variable, not the attribute): an
    over-count, which is the safe side for the checks that use this.
    """
    found: list[ast.AST] = []
    for node in scope_code(scope):
        if (isinstance(node, ast.Name) and node.id == name) or name in bound_by(node):
            found.append(node)
        if nested and isinstance(node, SCOPES) and (isinstance(node, ast.ClassDef) or name not in bound_names(node)):
            found += references(node, name)
    return found


def binds(nodes: Iterable[ast.AST], name: str) -> bool:
    """Whether anything under ``nodes``, in any scope (parameters included), binds ``name``."""
    return any(
        name in bound_by(child) or (isinstance(child, ast.arg) and child.arg == name)
        for node in nodes
        for child in ast.walk(node)
    )


def uses_dynamic_names(tree: ast.AST) -> bool:
    """Whether code reaches variables by name at run time (``locals()``, ``eval``, frames)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
            return True
    return False


def string_constants(tree: ast.AST) -> set[str]:
    """The text of every string literal (a name spelled in one may be looked up with ``getattr``)."""
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def rebound_builtins(tree: ast.AST) -> set[str]:
    """Builtins the program binds itself somewhere (``range = ...``): then they are not the builtins."""
    return {name for node in ast.walk(tree) for name in bound_by(node) if hasattr(builtins, name)} | {
        a.arg for a in ast.walk(tree) if isinstance(a, ast.arg) and hasattr(builtins, a.arg)
    }


# Names a human might give a variable; renaming draws from these (seeded), then falls back to numbered names.
VOCABULARY = (
    "acc",
    "amount",
    "best",
    "buf",
    "count",
    "current",
    "cursor",
    "delta",
    "elem",
    "entry",
    "flag",
    "head",
    "idx",
    "item",
    "key",
    "left",
    "limit",
    "memo",
    "node",
    "offset",
    "out",
    "part",
    "pos",
    "prev",
    "res",
    "result",
    "right",
    "seen",
    "size",
    "step",
    "tail",
    "temp",
    "token",
    "total",
    "val",
    "value",
    "word",
)


class FreshNames:
    """Names that mean nothing yet in a program (nor in ``reserved``): never a builtin, keyword or existing name."""

    def __init__(self, tree: ast.AST, reserved: frozenset[str] = frozenset()) -> None:
        self.taken = names_in(tree) | set(reserved) | set(dir(builtins)) | set(keyword.kwlist)
        self.taken |= set(keyword.softkwlist)
        self.taken |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        self.taken |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg}

    def take(self, name: str) -> str:
        """``name``, or ``name_1``, ``name_2``... the first that is free; it is taken from then on."""
        candidate, n = name, 0
        while candidate in self.taken:
            n += 1
            candidate = f"{name}_{n}"
        self.taken.add(candidate)
        return candidate

    def pick(self, rng: random.Random) -> str:
        """A free name drawn from ``VOCABULARY`` (numbered once the vocabulary is used up)."""
        free = [w for w in VOCABULARY if w not in self.taken]
        return self.take(rng.choice(free) if free else rng.choice(VOCABULARY))
