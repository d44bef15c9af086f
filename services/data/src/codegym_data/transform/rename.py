"""Renaming: local variables, comprehension variables and helper functions get new names."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping

from .base import Context, Transformation
from .scope import (
    COMPREHENSIONS,
    FUNCTIONS,
    bindings,
    bound_names,
    comprehension_targets,
    declared,
    parameters,
    string_constants,
    uses_dynamic_names,
)


class Rename(Transformation):
    """New names (drawn at random from plain words) for the program's own variables.

    Renamed: the local variables of every function (nested functions defined in it among them), the variables of
    comprehensions, and module-level functions. Never renamed: parameters (callers may pass them by keyword),
    attributes, methods and keyword arguments, imported names, names declared ``global``/``nonlocal``, dunder
    names, the entry point and every name the tests spell (``keep``), module-level names spelled in a string
    (``getattr(module, "f")``), and nothing at all in a program that reaches variables by name at run time
    (``locals()``, ``globals()``, ``eval``, frames). A new name is never one the program, its tests or the
    builtins already use, so nothing is captured or shadowed.
    """

    name = "rename"
    summary = "new names for local variables, comprehension variables and helper functions (never the entry point)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        if uses_dynamic_names(tree):
            return False
        changed = self._module_functions(tree, ctx)
        for function in [n for n in ast.walk(tree) if isinstance(n, FUNCTIONS)]:
            imported = {name for name, node in bindings(function) if isinstance(node, (ast.Import, ast.ImportFrom))}
            names = bound_names(function) - parameters(function) - declared(function) - imported
            mapping = _new_names(names, ctx)
            for statement in function.body:
                _visit(statement, mapping, mapping)
            changed |= bool(mapping)
        for comp in [n for n in ast.walk(tree) if isinstance(n, COMPREHENSIONS)]:
            mapping = _new_names(comprehension_targets(comp), ctx)
            for part in _comprehension_code(comp):
                _visit(part, mapping, mapping)
            changed |= bool(mapping)
        return changed

    def _module_functions(self, tree: ast.Module, ctx: Context) -> bool:
        found = bindings(tree)
        defined = Counter(name for name, _ in found)
        unsafe = ctx.keep | declared(tree) | string_constants(tree)
        names = {
            name for name, node in found if isinstance(node, FUNCTIONS) and defined[name] == 1 and name not in unsafe
        }
        mapping = _new_names(names, ctx)
        for statement in tree.body:
            _visit(statement, mapping, mapping)
        return bool(mapping)


def _new_names(names: set[str], ctx: Context) -> dict[str, str]:
    # Sorted first: the same seed gives the same names whatever order a set iterates in.
    return {name: ctx.fresh.pick(ctx.rng) for name in sorted(names) if not name.startswith("__")}


def _comprehension_code(comp: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> list[ast.AST]:
    """The parts of a comprehension that run in its own scope (all but the first iterable)."""
    parts: list[ast.AST] = [p for g in comp.generators for p in (g.target, *g.ifs)]
    parts += [g.iter for g in comp.generators[1:]]
    return parts + ([comp.key, comp.value] if isinstance(comp, ast.DictComp) else [comp.elt])


def _without(mapping: Mapping[str, str], names: set[str]) -> dict[str, str]:
    return {old: new for old, new in mapping.items() if old not in names}


def _visit(node: ast.AST, mapping: Mapping[str, str], inherited: Mapping[str, str]) -> None:
    """Rename ``mapping``'s names in ``node``, code of a scope that sees them; functions nested in it see
    ``inherited`` (the same, except in a class body, which nested functions do not see)."""
    if not mapping and not inherited:
        return
    if isinstance(node, ast.Name):
        node.id = mapping.get(node.id, node.id)
    elif isinstance(node, FUNCTIONS):
        node.name = mapping.get(node.name, node.name)
        for header in _headers(node):
            _visit(header, mapping, inherited)
        inner = _without(inherited, bound_names(node))
        for statement in node.body:
            _visit(statement, inner, inner)
    elif isinstance(node, ast.Lambda):
        for header in _headers(node):
            _visit(header, mapping, inherited)
        inner = _without(inherited, bound_names(node))
        _visit(node.body, inner, inner)
    elif isinstance(node, ast.ClassDef):
        node.name = mapping.get(node.name, node.name)
        for header in [*node.decorator_list, *node.bases, *node.keywords]:
            _visit(header, mapping, inherited)
        # A name the class body assigns is looked up in the class, then globals: never the enclosing function.
        in_class = _without(mapping, bound_names(node))
        for statement in node.body:
            _visit(statement, in_class, inherited)
    elif isinstance(node, COMPREHENSIONS):
        _visit(node.generators[0].iter, mapping, inherited)
        inner = _without(inherited, comprehension_targets(node))
        for part in _comprehension_code(node):
            _visit(part, inner, inner)
    else:
        if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            node.name = mapping.get(node.name, node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            node.rest = mapping.get(node.rest, node.rest)
        for child in ast.iter_child_nodes(node):
            _visit(child, mapping, inherited)


def _headers(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.AST]:
    """The parts of a function definition that run where it is defined: decorators, defaults, annotations."""
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    found: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    found += [a.annotation for a in every if a is not None and a.annotation is not None]
    if isinstance(node, FUNCTIONS):
        found += [*node.decorator_list, *([node.returns] if node.returns else [])]
    return found
