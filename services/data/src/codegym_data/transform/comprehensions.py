"""List comprehensions as ``append`` loops, and ``append`` loops as list comprehensions.

The two differ in scope: a comprehension's ``for`` variables live in a scope of their own, a loop's in the
function. Both directions therefore require those variables to be used nowhere else in the function, which
makes the difference unobservable. Only function bodies are rewritten (at module level the variables would
be globals, and a class body's names are attributes a comprehension cannot see).
"""

from __future__ import annotations

import ast

from .base import Context, Transformation, blocks
from .scope import AnyFunction, declared, references, uses_dynamic_names


def _mentions(nodes: list[ast.AST], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for node in nodes for n in ast.walk(node))


def _loop_variables_private(function: AnyFunction, names: set[str], within: ast.AST) -> bool:
    """Whether each name is used in ``function`` only inside ``within`` (a comprehension or a loop)."""
    inside = {id(n) for n in ast.walk(within)}
    for name in names:
        if name in declared(function):
            return False
        # Every occurrence in any scope counts here, even one that is another scope's own variable.
        if any(id(n) not in inside for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name):
            return False
        if any(isinstance(a, ast.arg) and a.arg == name for a in ast.walk(function)):
            return False
    return True


def _unsupported(node: ast.AST) -> bool:
    """Parts that mean something else inside a comprehension than in a loop: ``:=``, ``yield``, ``await``,
    ``async for``, and ``super()`` (which needs the method's own frame)."""
    return any(
        isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await))
        or (isinstance(n, ast.comprehension) and n.is_async)
        or (isinstance(n, ast.Name) and n.id == "super")
        for n in ast.walk(node)
    )


def _targets(generator: ast.comprehension) -> set[str]:
    return {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}


def _read_in_order(generators: list[ast.comprehension]) -> bool:
    """Whether each clause reads only the variables of the clauses before it (and its own, in its conditions).

    A loop that reads a later clause's variable sees the previous iteration's value; a comprehension raises.
    """
    for k, generator in enumerate(generators):
        later = set().union(*(_targets(g) for g in generators[k + 1 :]))
        if _names(generator.iter) & (later | _targets(generator)) or any(_names(c) & later for c in generator.ifs):
            return False
    return True


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _local_only(function: AnyFunction, name: str) -> bool:
    """A variable of ``function`` that no nested scope uses and nothing declares global or nonlocal."""
    return name not in declared(function) and len(references(function, name)) == len(
        references(function, name, nested=False)
    )


class ComprehensionToLoop(Transformation):
    """``x = [e for a in xs if c]`` and ``return [...]`` as a loop that appends to a list.

    ``x = []`` is built in place when ``x`` is a plain local not used inside the comprehension and the statement
    is not inside a ``try`` or ``with`` (where an error half-way could leave a partial list visible); otherwise a
    fresh list is built and then assigned or returned.
    """

    name = "comprehension_to_loop"
    summary = "list comprehensions assigned or returned as loops that append to a list"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = False
        for block in blocks(tree):
            if block.function is None:
                continue
            rewritten: list[ast.stmt] = []
            for statement in block.body:
                out = self._statement(statement, block.function, block.guarded, ctx)
                rewritten += out if out is not None else [statement]
                changed |= out is not None
            block.body[:] = rewritten
        return changed

    def _statement(
        self, statement: ast.stmt, function: AnyFunction, guarded: bool, ctx: Context
    ) -> list[ast.stmt] | None:
        match statement:
            case ast.Assign(targets=[ast.Name(id=name)], value=ast.ListComp() as comp):
                target: str | None = name
            case ast.Return(value=ast.ListComp() as comp):
                target = None
            case _:
                return None
        variables = {n.id for g in comp.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if _unsupported(comp) or uses_dynamic_names(function) or not _read_in_order(comp.generators):
            return None
        if not _loop_variables_private(function, variables, comp):
            return None
        direct = target is not None and not guarded and not _mentions([comp], target) and _local_only(function, target)
        acc = target if direct and target is not None else ctx.fresh.take("acc")
        append = ast.Attribute(ast.Name(acc, ast.Load()), "append", ast.Load())
        inner: list[ast.stmt] = [ast.Expr(ast.Call(append, [comp.elt], []))]
        for generator in reversed(comp.generators):
            for condition in reversed(generator.ifs):
                inner = [ast.If(condition, inner, [])]
            inner = [ast.For(generator.target, generator.iter, inner, [])]
        out: list[ast.stmt] = [ast.Assign([ast.Name(acc, ast.Store())], ast.List([], ast.Load())), *inner]
        if target is None:
            out.append(ast.Return(ast.Name(acc, ast.Load())))
        elif not direct:
            out.append(ast.Assign([ast.Name(target, ast.Store())], ast.Name(acc, ast.Load())))
        return out


class LoopToComprehension(Transformation):
    """``acc = []`` directly followed by a loop whose only effect is ``acc.append(e)`` (through nested ``for``
    and ``if`` without ``else``) as ``acc = [e for ...]``.

    Only when ``acc`` is not used inside the loop, is a plain local, and the loop is not inside ``try`` or
    ``with``, so its partial states cannot be observed; and when the loop's variables are used nowhere else.
    """

    name = "loop_to_comprehension"
    summary = "loops whose only effect is appending to a new list as list comprehensions"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        changed = False
        for block in blocks(tree):
            if block.function is None or block.guarded:
                continue
            k = 0
            while k + 1 < len(block.body):
                comp = self._pair(block.body[k], block.body[k + 1], block.function)
                if comp is not None:
                    block.body[k : k + 2] = [comp]
                    changed = True
                k += 1
        return changed

    def _pair(self, init: ast.stmt, loop: ast.stmt, function: AnyFunction) -> ast.Assign | None:
        match init:
            case ast.Assign(targets=[ast.Name(id=acc)], value=ast.List(elts=[])):
                pass
            case _:
                return None
        if not isinstance(loop, ast.For):
            return None
        generators: list[ast.comprehension] = []
        node: ast.stmt = loop
        while True:
            if isinstance(node, ast.For) and not node.orelse and len(node.body) == 1:
                generators.append(ast.comprehension(node.target, node.iter, [], 0))
            elif isinstance(node, ast.If) and not node.orelse and len(node.body) == 1 and generators:
                generators[-1].ifs.append(node.test)
            else:
                break
            node = node.body[0]
        match node:
            case ast.Expr(
                value=ast.Call(func=ast.Attribute(value=ast.Name(id=owner), attr="append"), args=[elt], keywords=[])
            ) if owner == acc and not isinstance(elt, ast.Starred):
                pass
            case _:
                return None
        parts: list[ast.AST] = [elt, *(p for g in generators for p in (g.target, g.iter, *g.ifs))]
        if _mentions(parts, acc) or not _local_only(function, acc) or any(_unsupported(p) for p in parts):
            return None
        if uses_dynamic_names(function) or not _read_in_order(generators):
            return None
        variables = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if not _loop_variables_private(function, variables, loop):
            return None
        return ast.Assign([ast.Name(acc, ast.Store())], ast.ListComp(elt, generators))
