"""``for`` loops as ``while`` loops, and counting ``while`` loops as ``for`` loops over a ``range``."""

from __future__ import annotations

import ast

from .base import Block, Context, Transformation, blocks
from .purity import Purity
from .scope import AnyFunction, bindings, binds, declared, rebound_builtins, references, uses_dynamic_names


def int_literal(node: ast.AST) -> int | None:
    """The value of an integer literal (``3``, ``-3``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_literal(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def has_continue(body: list[ast.stmt]) -> bool:
    """Whether a ``continue`` in ``body`` belongs to the loop whose body it is (not to a loop inside it)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Continue):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            stack.extend(node.orelse)  # an inner loop's else runs in this loop: its continue is this loop's
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def only_within(function: AnyFunction, name: str, parts: list[ast.AST]) -> bool:
    """Whether ``function``'s variable ``name`` is used only inside ``parts``, never from a nested scope, and
    never declared ``global`` or ``nonlocal``: then its value outside them cannot be observed."""
    if name in declared(function):
        return False
    refs = references(function, name)
    inside = {id(n) for part in parts for n in ast.walk(part)}
    return len(refs) == len(references(function, name, nested=False)) and all(id(r) in inside for r in refs)


def _name(name: str, store: bool = False) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Store() if store else ast.Load())


def _int(value: int) -> ast.expr:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def _invariant_local(node: ast.AST, function: AnyFunction | None, body: list[ast.stmt]) -> bool:
    """A name of ``function`` that ``body`` never rebinds (so reading it again gives the same value)."""
    return (
        function is not None
        and isinstance(node, ast.Name)
        and node.id not in declared(function)
        and any(name == node.id for name, _ in bindings(function))
        and not binds(body, node.id)
    )


class ForToWhile(Transformation):
    """Every ``for`` loop as a ``while`` loop.

    ``for i in range(a, b, c)`` (``a`` and ``c`` integer literals) becomes a counting loop: ``i = a; while i < b:
    ...; i += c`` when ``i`` is used nowhere else in its function, is not reassigned in the body, and the body
    has no ``continue``; otherwise a separate counter assigns ``i`` at the top of each iteration, which keeps
    ``continue`` and the value ``i`` is left with exact. ``b`` is computed once, before the loop, unless it is a
    literal or a local the body does not reassign. Any other ``for`` loop without an ``else`` walks its iterator:
    ``it = iter(xs); while True: try: x = next(it) except StopIteration: break``. Loops in class bodies,
    ``async for``, and programs that read their variables by name (``locals()``, ``eval``) are left alone.
    """

    name = "for_to_while"
    summary = "for loops as while loops (range loops as counting loops, others over their iterator)"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        if uses_dynamic_names(tree):
            return False  # a new counter would show in locals(), globals() or vars()
        shadowed = rebound_builtins(tree)
        changed = False
        for block in blocks(tree):
            if block.class_body:
                continue
            rewritten: list[ast.stmt] = []
            for statement in block.body:
                out = self._loop(statement, block, ctx, shadowed) if isinstance(statement, ast.For) else None
                rewritten += out if out is not None else [statement]
                changed |= out is not None
            block.body[:] = rewritten
        return changed

    def _loop(self, loop: ast.For, block: Block, ctx: Context, shadowed: set[str]) -> list[ast.stmt] | None:
        bounds = _range_bounds(loop.iter, shadowed)
        if bounds is not None:
            return self._counting(loop, *bounds, block.function, ctx)
        if loop.orelse or {"iter", "next", "StopIteration"} & shadowed:
            return None
        iterator = ctx.fresh.take("iterator")
        step = ast.Try(
            body=[ast.Assign(targets=[loop.target], value=ast.Call(_name("next"), [_name(iterator)], []))],
            handlers=[ast.ExceptHandler(type=_name("StopIteration"), name=None, body=[ast.Break()])],
            orelse=[],
            finalbody=[],
        )
        return [
            ast.Assign(targets=[_name(iterator, store=True)], value=ast.Call(_name("iter"), [loop.iter], [])),
            ast.While(test=ast.Constant(True), body=[step, *loop.body], orelse=[]),
        ]

    def _counting(
        self, loop: ast.For, start: int, stop: ast.expr, step: int, function: AnyFunction | None, ctx: Context
    ) -> list[ast.stmt]:
        before: list[ast.stmt] = []
        if int_literal(stop) is None and not _invariant_local(stop, function, loop.body):
            limit = ctx.fresh.take("stop")
            before.append(ast.Assign(targets=[_name(limit, store=True)], value=stop))
            stop = _name(limit)
        target = loop.target
        simple = (
            function is not None
            and isinstance(target, ast.Name)
            and not has_continue(loop.body)
            and not binds(loop.body, target.id)
            and only_within(function, target.id, [target, *loop.body])
        )
        counter = target.id if simple and isinstance(target, ast.Name) else ctx.fresh.take("index")
        advance = ast.AugAssign(
            target=_name(counter, store=True), op=ast.Add() if step > 0 else ast.Sub(), value=ast.Constant(abs(step))
        )
        test = ast.Compare(_name(counter), [ast.Lt() if step > 0 else ast.Gt()], [stop])
        if simple:
            body = [*loop.body, advance]
        else:
            # The counter moves on before the body runs, so a ``continue`` in it still advances the loop.
            body = [ast.Assign(targets=[target], value=_name(counter)), advance, *loop.body]
        init = ast.Assign(targets=[_name(counter, store=True)], value=_int(start))
        return [init, *before, ast.While(test=test, body=body, orelse=loop.orelse)]


def _range_bounds(node: ast.expr, shadowed: set[str]) -> tuple[int, ast.expr, int] | None:
    """(start, stop, step) of ``range(...)`` with a literal start and step, else None."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and "range" not in shadowed
        and not node.keywords
        and 1 <= len(node.args) <= 3
        and not any(isinstance(a, ast.Starred) for a in node.args)
    ):
        return None
    if len(node.args) == 1:
        return 0, node.args[0], 1
    start = int_literal(node.args[0])
    step = int_literal(node.args[2]) if len(node.args) == 3 else 1
    if start is None or not step:
        return None
    return start, node.args[1], step


class WhileToFor(Transformation):
    """Counting ``while`` loops as ``for`` loops over a ``range``, where that is provably the same loop.

    ``i = a`` directly followed by ``while i < b:`` (or ``<=``, or ``>``/``>=`` counting down) whose body ends
    with ``i += c`` (``c`` a positive literal; ``-=`` counting down) becomes ``for i in range(a, b, c):``, when:
    it is in a function; ``i`` is used nowhere else in it (nor from a nested scope) and not reassigned in the body;
    the body has no ``continue`` (it would skip the increment); ``a`` and ``b`` are integers (literals, ``len()``,
    ``int()``, arithmetic of those, parameters annotated ``int``, locals assigned once from such values); and ``b``
    cannot change in the loop: the body does not rebind its names, and when ``b`` reads more than names
    (``len(xs)``) the body changes nothing but local names (see ``purity``).
    """

    name = "while_to_for"
    summary = "counting while loops as for loops over a range, only where provably the same loop"

    def rewrite(self, tree: ast.Module, ctx: Context) -> bool:
        purity = Purity(tree)
        shadowed = rebound_builtins(tree)
        changed = False
        for block in blocks(tree):
            if block.function is None:
                continue
            k = 0
            while k + 1 < len(block.body):
                loop = self._loop(block.body[k], block.body[k + 1], block.function, purity, shadowed)
                if loop is not None:
                    block.body[k : k + 2] = [loop]
                    changed = True
                k += 1
        return changed

    def _loop(
        self, init: ast.stmt, loop: ast.stmt, function: AnyFunction, purity: Purity, shadowed: set[str]
    ) -> ast.For | None:
        match init, loop:
            case (
                ast.Assign(targets=[ast.Name(id=name) as target], value=start),
                ast.While(test=ast.Compare(left=ast.Name(id=tested), ops=[op], comparators=[stop]) as test),
            ) if tested == name and loop.body:
                pass
            case _:
                return None
        last = loop.body[-1]
        if not (isinstance(last, ast.AugAssign) and isinstance(last.target, ast.Name) and last.target.id == name):
            return None
        amount = int_literal(last.value)
        if amount is None or amount <= 0 or not isinstance(last.op, (ast.Add, ast.Sub)):
            return None
        step = amount if isinstance(last.op, ast.Add) else -amount
        if not ((isinstance(op, (ast.Lt, ast.LtE)) and step > 0) or (isinstance(op, (ast.Gt, ast.GtE)) and step < 0)):
            return None
        body = loop.body[:-1]
        if has_continue(body) or binds(body, name) or {"range", "len", "int"} & shadowed:
            return None
        if not only_within(function, name, [target, test.left, *body, last.target]):
            return None
        if not (_is_int(start, function) and _is_int(stop, function)):
            return None
        if any(binds(body, n.id) for n in ast.walk(stop) if isinstance(n, ast.Name)):
            return None
        reads_state = any(isinstance(n, (ast.Call, ast.Subscript, ast.Attribute)) for n in ast.walk(stop))
        if reads_state and not (purity.expression(stop) and purity.mutation_free(body)):
            return None
        if isinstance(op, (ast.LtE, ast.GtE)):
            stop = _shifted(stop, 1 if step > 0 else -1)
        args: list[ast.expr] = [stop] if step == 1 and int_literal(start) == 0 else [start, stop]
        if step != 1:
            args.append(_int(step))
        range_call = ast.Call(_name("range"), args, [])
        return ast.For(target=_name(name, store=True), iter=range_call, body=body or [ast.Pass()], orelse=loop.orelse)


def _shifted(node: ast.expr, by: int) -> ast.expr:
    """``node + by``, folded when ``node`` is a literal."""
    value = int_literal(node)
    if value is not None:
        return _int(value + by)
    return ast.BinOp(node, ast.Add() if by > 0 else ast.Sub(), ast.Constant(abs(by)))


_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd)


def _is_int(node: ast.AST, function: AnyFunction, depth: int = 0) -> bool:
    """Whether ``node`` certainly evaluates to an ``int`` in ``function`` (see ``WhileToFor``)."""
    if depth > 8:
        return False
    if int_literal(node) is not None:
        return True
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in ("len", "int") and not node.keywords
    if isinstance(node, ast.BinOp):
        return (
            isinstance(node.op, _INT_OPS)
            and _is_int(node.left, function, depth + 1)
            and _is_int(node.right, function, depth + 1)
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)) and _is_int(node.operand, function, depth + 1)
    if not isinstance(node, ast.Name) or node.id in declared(function):
        return False
    found = [where for name, where in bindings(function) if name == node.id]
    if len(found) != 1:
        return False
    (where,) = found
    if where is function.args:
        args = function.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        return any(a.arg == node.id and isinstance(a.annotation, ast.Name) and a.annotation.id == "int" for a in every)
    assign = next(
        (s for s in ast.walk(function) if isinstance(s, ast.Assign) and any(t is where for t in s.targets)), None
    )
    return assign is not None and _is_int(assign.value, function, depth + 1)
