"""Whether the statements the sanitiser drops leave what stays as the program as written has it (``sanitize.py``'s
last step): where one may not, the program is judged as written, as the reference runs it.

Reading every road by which a statement changes a table (a method, ``getattr``, a class's ``__init__``, an alias
made in another statement, a callback handed to ``sorted``) was a list the policy kept lengthening (rounds 61-66).
So a dropped statement is read for what it names, not for what it does: it may name the kept code's data only as
the plain argument of a builtin that reads (``print(T)``, ``print(T[i])``), and the program's own functions and
classes only as what it calls, and those only where no call of them changes that data. Anything else
(``T.clear()``, ``x = [T]``, ``key=T.remove``, ``b = f``, ``B()`` whose ``__init__`` clears ``T``, an attribute
stored to anywhere, a class made by a call) leaves the program as written. A demo reads the program's functions'
results (``print(f(3))``, ``n = int(input())``): it names nothing else of the program's, and goes.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Set

from codegym_evaluator.sanitize_calls import callee_name
from codegym_evaluator.sanitize_effects import at_import

# Builtins that read what they are given and change nothing of it: a statement may hand them the kept code's data
# (``print(T)``, ``len(T)``) and still go.
READ_ONLY = frozenset(
    {"print", "len", "repr", "str", "sorted", "sum", "min", "max", "any", "all", "isinstance", "type", "id", "hash"}
    | {"list", "tuple", "set", "frozenset", "dict", "bool", "int", "float", "abs", "format", "enumerate", "range"}
)
_READ_ONLY_CALLS = frozenset((name, True) for name in READ_ONLY)  # as ``callee_name`` names them


def changes(node: ast.AST, data: Callable[[str], bool], own: Set[str], changers: Set[str], bound: Set[str]) -> bool:
    """Whether dropping ``node`` may leave what stays otherwise than the program as written has it: it names the
    kept code's data (``data``: of a name) but as a plain argument of a builtin that reads, names a function or
    class of the program's (``own``) but as what it calls, calls one of ``changers`` (those whose calls may change
    that data, or rebind a kept name), calls a value the program's top level binds (``bound``: ``b = f`` then
    ``b()``), or stores to an attribute (of a module: ``__main__.f = g``)."""
    parts = list(at_import(node))
    plain: set[int] = set()  # the Name nodes that are a plain argument of a builtin that reads
    callees: set[int] = set()  # and those that a call calls
    for part in parts:
        if isinstance(part, ast.Call):
            if isinstance(part.func, ast.Name):
                callees.add(id(part.func))
            if callee_name(part.func) in _READ_ONLY_CALLS and not part.keywords:
                plain.update(id(_read(a)) for a in part.args)
    for part in parts:
        if isinstance(part, ast.Attribute) and isinstance(part.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id in changers:
            return True
        if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id in bound:
            return True
        if not isinstance(part, ast.Name) or not isinstance(part.ctx, ast.Load):
            continue
        if part.id in own and id(part) not in plain and id(part) not in callees:
            return True  # ``b = f``, ``key=f``, ``raise E``: a road to its code this reading does not follow
        if part.id not in own and data(part.id) and id(part) not in plain:
            return True  # ``T.clear()``, ``x = [T]``, and a call of data (``b = f`` kept, then ``b()``)
    return False


def _read(arg: ast.expr) -> ast.expr:
    """What an argument reads: ``T`` of ``T``, ``T[i]`` or ``T[i][j]`` (an item read is no change)."""
    while isinstance(arg, ast.Subscript):
        arg = arg.value
    return arg


def calls_as_made(node: ast.stmt) -> bool:
    """A definition whose making calls anything but a builtin that only reads: a class's body or a function's
    defaults run at import (``class _S: sys.setrecursionlimit(10**5)``, ``def _i(_=setup()): ...``): dropped as
    unneeded, a right program lost its set-up (round 66). Such a one goes only with the program judged as written."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(p, ast.Call) and callee_name(p.func) not in _READ_ONLY_CALLS for p in at_import(node))


def methods(node: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a class defines, its nested classes' too: any of them may run when the class is used."""
    return [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
