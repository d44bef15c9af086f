"""Which expressions and statements change nothing but local names, so that moving them is safe.

An expression is *pure* when evaluating it changes no state: literals, names, operators, subscripts and
attribute reads, comprehensions, lambdas, and calls of the builtins in ``PURE_BUILTINS``, of the methods in
``PURE_METHODS`` and of the program's own pure functions (``pure_functions``), whose functions arguments
(``key=``) are pure too. This holds for the values solutions compute with: numbers, strings, lists, tuples,
dicts and sets. It assumes that operators, ``len`` and those methods behave as they do on them (a class whose
``__add__`` writes a file, or an iterator that ``list()`` would consume, breaks the assumption); the sandbox's
verification of every transformed program is what catches a program that breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .scope import FUNCTIONS, rebound_builtins

PURE_BUILTINS = frozenset(
    {
        "abs",
        "all",
        "any",
        "bin",
        "bool",
        "chr",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "frozenset",
        "hex",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "oct",
        "ord",
        "pow",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
    }
)
# Methods that change nothing on any builtin type that has them (str, bytes, list, tuple, dict, set, int).
PURE_METHODS = frozenset(
    {
        "bit_length",
        "capitalize",
        "casefold",
        "center",
        "copy",
        "count",
        "difference",
        "endswith",
        "find",
        "format",
        "get",
        "index",
        "intersection",
        "isalnum",
        "isalpha",
        "isdecimal",
        "isdigit",
        "isdisjoint",
        "islower",
        "isnumeric",
        "isspace",
        "issubset",
        "issuperset",
        "istitle",
        "isupper",
        "items",
        "join",
        "keys",
        "ljust",
        "lower",
        "lstrip",
        "partition",
        "replace",
        "rfind",
        "rindex",
        "rjust",
        "rpartition",
        "rsplit",
        "rstrip",
        "split",
        "splitlines",
        "startswith",
        "strip",
        "swapcase",
        "symmetric_difference",
        "title",
        "union",
        "upper",
        "values",
        "zfill",
    }
)
# Values that are new objects (or immutable): augmenting a name bound only to these mutates nothing shared.
# (Not ``a or b``: it is one of its operands.)
_FRESH_VALUES = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.List, ast.Tuple, ast.Set)
_FRESH_CALLS = frozenset({"abs", "bool", "dict", "float", "int", "len", "list", "set", "sorted", "str", "sum"})


class Purity:
    """Purity of expressions and statements within one program (its own pure functions included)."""

    def __init__(self, tree: ast.Module) -> None:
        self.builtins = PURE_BUILTINS - rebound_builtins(tree)
        self.functions: dict[str, ast.FunctionDef] = pure_functions(tree, self.builtins)

    def expression(self, node: ast.AST) -> bool:
        """Whether evaluating ``node`` changes no state (it may still raise)."""
        return expression_is_pure(node, self.builtins, set(self.functions))

    def reads(self, node: ast.AST) -> set[str]:
        """Names ``node`` may read, with every name in the bodies of the program's functions it calls."""
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        seen: set[str] = set()
        while called := (names & set(self.functions)) - seen:  # the functions those functions call, too
            seen |= called
            for name in called:
                names |= {n.id for n in ast.walk(self.functions[name]) if isinstance(n, ast.Name)}
        return names

    def mutation_free(self, body: Iterable[ast.stmt]) -> bool:
        """Whether statements only bind local names and evaluate pure expressions (no ``+=``, no stores into
        objects, no impure call)."""
        return all(
            _statement_is_pure(s, self.builtins, set(self.functions), frozenset(), allow_augment=False) for s in body
        )


def expression_is_pure(node: ast.AST, builtins: frozenset[str], functions: set[str]) -> bool:
    """See ``Purity.expression``."""
    for child in ast.walk(node):
        if isinstance(child, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if isinstance(child, (ast.Name, ast.Subscript, ast.Attribute, ast.Starred)) and not isinstance(
            child.ctx, ast.Load
        ):
            return False
        if isinstance(child, ast.Call) and not _call_is_pure(child, builtins, functions):
            return False
    return True


def _call_is_pure(call: ast.Call, builtins: frozenset[str], functions: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        known = func.id in builtins or func.id in functions
    else:
        known = isinstance(func, ast.Attribute) and func.attr in PURE_METHODS
    if not known:
        return False
    # Of these, only ``key=`` (sorted, min, max) calls what it is given: a lambda (whose body the walk that
    # found this call checks), a builtin, a pure method or one of the program's pure functions.
    for keyword in call.keywords:
        if keyword.arg == "key" and not _callable_is_pure(keyword.value, builtins, functions):
            return False
    return True


def _callable_is_pure(node: ast.AST, builtins: frozenset[str], functions: set[str]) -> bool:
    if isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.Name):
        return node.id in builtins or node.id in functions
    return isinstance(node, ast.Attribute) and node.attr in PURE_METHODS


def pure_functions(tree: ast.Module, builtins: frozenset[str]) -> dict[str, ast.FunctionDef]:
    """The program's functions whose calls change no state, by name (a name defined more than once is left out).

    Their statements bind local names only (``+=`` only on names that always hold new objects), their
    expressions are pure, and they call only pure functions: the largest set closed under that, so that
    recursive functions qualify.
    """
    defined: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            defined.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            defined.setdefault(node.id, []).append(node)
    candidates = {
        name: nodes[0]
        for name, nodes in defined.items()
        if len(nodes) == 1 and isinstance(nodes[0], ast.FunctionDef) and not nodes[0].decorator_list
    }
    pure = set(candidates)
    while True:
        still = {
            name
            for name in pure
            if all(
                _statement_is_pure(s, builtins, pure, _fresh_locals(candidates[name]), allow_augment=True)
                for s in candidates[name].body
            )
        }
        if still == pure:
            return {name: candidates[name] for name in sorted(pure)}
        pure = still


def _fresh_locals(function: ast.FunctionDef) -> frozenset[str]:
    """Names of ``function`` that only ever hold new objects (so ``+=`` on them mutates nothing shared)."""
    values: dict[str, list[ast.AST]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        values.setdefault(name.id, []).append(node.value if isinstance(target, ast.Name) else target)
        elif isinstance(node, (ast.For, ast.comprehension)):
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    values.setdefault(name.id, []).append(node.target)  # an element: maybe shared
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    return frozenset(
        name for name, vals in values.items() if name not in params and all(_is_fresh_value(v) for v in vals)
    )


def _is_fresh_value(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in _FRESH_CALLS
    return isinstance(node, _FRESH_VALUES)


def _statement_is_pure(
    statement: ast.stmt, builtins: frozenset[str], functions: set[str], fresh: frozenset[str], *, allow_augment: bool
) -> bool:
    def pure(node: ast.AST | None) -> bool:
        return node is None or expression_is_pure(node, builtins, functions)

    def names_only(target: ast.AST) -> bool:
        return all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store)) for n in ast.walk(target))

    def body(statements: list[ast.stmt]) -> bool:
        return all(_statement_is_pure(s, builtins, functions, fresh, allow_augment=allow_augment) for s in statements)

    match statement:
        case ast.Assign(targets=targets, value=value):
            return all(names_only(t) for t in targets) and pure(value)
        case ast.AnnAssign(target=ast.Name(), value=value):
            return pure(value)
        case ast.AugAssign(target=ast.Name(id=name), value=value):
            return allow_augment and name in fresh and pure(value)
        case ast.Expr(value=value):
            return pure(value)
        case ast.Return(value=value):
            return pure(value)
        case ast.If(test=test, body=then, orelse=orelse) | ast.While(test=test, body=then, orelse=orelse):
            return pure(test) and body(then) and body(orelse)
        case ast.For(target=target, iter=iterable, body=then, orelse=orelse):
            return names_only(target) and pure(iterable) and body(then) and body(orelse)
        case ast.Pass() | ast.Break() | ast.Continue():
            return True
        case ast.Assert(test=test, msg=msg):
            return pure(test) and pure(msg)
        case ast.Raise(exc=exc, cause=cause):
            return pure(exc) and pure(cause)
        case ast.FunctionDef():
            return True  # defining a nested function changes nothing; calling it is judged where it is called
    return False
