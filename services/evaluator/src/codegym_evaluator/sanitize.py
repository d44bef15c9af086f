"""Keep what a function task needs: imports, set-up, the entry point, and the definitions it uses (transitively).

What goes is what a reference harness would not run either, or runs only to fail a right answer: the model's
own tests (asserts, a test runner), demo calls and prints of its functions, ``input()`` and a
``__main__`` block (HumanEval's harness ``exec``s the completion, where ``__name__`` is not ``"__main__"``).
What stays is what runs at import and changes how the program computes: a statement that calls into or
assigns to a module the program imported (``sys.setrecursionlimit(10**6)``, ``decimal.getcontext().prec =
50``, ``sys.set_int_max_str_digits(0)``, ``mp.dps = 30``), with the names it reads, unless it calls a function
of the program's own (a demo), ends the process, or runs tests. So does what fills a name the kept code
reads: a top-level loop, ``with`` block or call that mutates a table the entry point uses (``FIB.append``,
``TABLE[i] = ...``, ``_fill()`` where ``_fill`` does so, ``fill(N, TABLE)``), or a loop that warms the cache of a
memoised function it calls, as it runs when a harness imports the completion.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Set as AbstractSet

from codegym_evaluator import call_closure, python_syntax, sanitize_guard
from codegym_evaluator.sanitize_calls import ENDS_OR_TESTS, callee_name, calls_end, qualified, within
from codegym_evaluator.sanitize_effects import Groups, aliases, at_import, binds, caches, mutated, rebinders

# The line ends of Python's tokenizer, which numbers a node's lines: ``str.splitlines`` also breaks at a form feed,
# ``\x1c``-``\x1e``, ``\x85``, ``\u2028`` and ``\u2029``, which a comment or a string may hold, and every cut after
# one would take the wrong lines.
_LINE_END = re.compile(r"\r\n|\r|\n")


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


def _imports(body: list[ast.stmt]) -> dict[str, str]:
    """What each name bound by a top-level import stands for: ``np`` -> ``numpy``, ``exit`` -> ``sys.exit``."""
    bound: dict[str, str] = {}
    for node in body:
        if not _is_import_block(node):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Import):
                for a in n.names:
                    bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                bound.update({a.asname or a.name: f"{n.module}.{a.name}" for a in n.names if a.name != "*"})
    for node in body:  # a name that holds a module's object sets it up as the module's name does (round 63)
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        reached = qualified(node.value, bound) if isinstance(target, ast.Name) else None  # type: ignore[attr-defined]
        if isinstance(target, ast.Name) and reached is not None and not within(reached, ENDS_OR_TESTS):
            bound[target.id] = reached  # ``ctx = decimal.getcontext()``: ``ctx.prec = 50``
    return bound


def _sets_up(
    node: ast.stmt,
    imports: dict[str, str],
    functions: set[str],
    setters: AbstractSet[str] = frozenset(),
    inside: bool = False,
) -> bool:
    """Whether ``node`` changes at import how the program computes (see the module's docstring): a call of one of
    the program's functions too that does nothing else (``setters``: ``_setup()`` raising the recursion limit).
    ``inside``: ``node`` is in a block already read for the program's names, which its parts are not read for again
    (98 nested ``if``s read each part 98 times: 5.8 s for 128 KiB; round 64)."""
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    if call is not None and isinstance(call.func, ast.Name) and call.func.id in setters:
        return not (_used_names(call) - {call.func.id}) & functions  # what it is given is the program's to compute
    if not inside and _used_names(node) & functions:
        return False  # it runs the program's own code: a demo
    reached: list[str | None]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        reached = [qualified(node.value, imports)]
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return False
        if not all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
            return False
        reached = [qualified(t, imports) for t in targets]
    elif isinstance(node, ast.If) and not _is_main_guard(node):
        return all(
            _sets_up(s, imports, functions, setters, True) or _is_import_block(s) for s in node.body + node.orelse
        )
    elif isinstance(node, ast.Try):
        inner = node.body + node.orelse + node.finalbody
        handled = [s for h in node.handlers for s in h.body]
        return all(_sets_up(s, imports, functions, setters, True) or _is_import_block(s) for s in inner) and all(
            _sets_up(s, imports, functions, setters, True) or _is_import_block(s) or isinstance(s, ast.Pass)
            for s in handled
        )
    else:
        return False
    return all(q is not None and not within(q, ENDS_OR_TESTS) for q in reached)


def _fills(
    node: ast.stmt,
    data: set[str],
    functions: AbstractSet[str],
    cached: set[str],
    groups: Groups,
    imports: dict[str, str],
) -> tuple[set[str], set[str]]:
    """The names whose need keeps top-level ``node``, as one that fills them for the kept code, and the functions
    of the program's (``functions``) it calls, which keep it as what they change does: a loop, ``with`` block,
    condition or call that changes one of the program's own data (``data``: what its top-level assignments and
    classes bind), directly, through another name of the same object (``groups``: ``p = PRIMES``), through a
    function of the program's that does, or by passing it to one (``fill(100, TABLE)``); or a loop that warms the
    cache of a function of the program's (``cached``: ``lru_cache`` and the like, called low to high so that a deep
    call later recurses little: a loop, a comprehension, ``map``; round 60), needed as that function. Not a demo,
    which only reads."""
    if isinstance(node, ast.If) and _is_main_guard(node):
        return set(), set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return set(), set()  # definitions are kept by what they define
    if any(isinstance(n, ast.Call) and calls_end(n) for n in ast.walk(node)):
        return set(), set()
    # An assignment, a ``del`` or an assert is kept by what it defines, as it warms a cache, and as it changes the
    # program's data (``_ = T.sort()``, ``del T[0]``: dropped, a right program was made wrong, a wrong one right;
    # round 62); a demo's assert, which changes nothing, never.
    own = {
        (n.func.id, a.id)
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions
        for a in [n.func, *n.args, *(k.value for k in n.keywords)]
        if isinstance(a, ast.Name)
    }
    passed = {name for function, name in own if name != function}
    # ... or hands it to a library's function, which may change it (``heapq.heappush(H, x)``, ``bisect.insort``,
    # ``random.shuffle``: round 63), never in an assert, which checks.
    if not isinstance(node, ast.Assert):
        passed |= {
            a.id
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and qualified(n.func, imports) is not None
            for a in [*n.args, *(k.value for k in n.keywords)]
            if isinstance(a, ast.Name)
        }
    filled = {group for group in map(groups.of, mutated(node) | passed) if group in data}
    return filled | _warmed(node, cached), _used_names(node) & functions  # see ``_sanitize``


_REPEATS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _warmed(node: ast.stmt, cached: set[str]) -> set[str]:
    """The memoised functions (``cached``) that ``node`` calls over and over: in a loop or a comprehension, or
    handed to ``map`` (``_ = [ways(i) for i in range(3000)]``, ``list(map(ways, range(3000)))``)."""
    if not cached or isinstance(node, ast.Assert):
        return set()
    found: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:  # each part read once: a repeat's names all at once, never again for a repeat within it (round 61)
        part = stack.pop()
        if isinstance(part, _REPEATS) or (isinstance(part, ast.Call) and callee_name(part.func) == ("map", True)):
            found |= {n.id for n in ast.walk(part) if isinstance(n, ast.Name) and n.id in cached}
        else:
            stack.extend(ast.iter_child_nodes(part))
    return found


def _registers(node: ast.stmt) -> bool:
    """A definition whose making runs code of the program's as it is imported: a decorator (``@register``, which
    may fill a table the entry point reads), a class with bases or keywords (a base's ``__init_subclass__``). A
    harness that imports the program makes it: kept, needed by name or not."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return bool(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return bool(node.decorator_list or node.keywords or node.bases)
    return False


def _changed(
    body: list[ast.stmt],
    dropped: list[ast.stmt],
    needed: set[str],
    data: set[str],
    groups: Groups,
    own: dict[str, set[str]],
    rebinding: set[str],
) -> bool:
    """Whether a statement of ``dropped`` may leave what stays otherwise than as written (``sanitize_guard``): the
    program's functions and classes, what each changes of the kept code's data (``own``, the functions'; a class's
    by its methods) or whether it rebinds a name the kept code needs (``rebinding``), and who calls whom, read anew
    for it."""
    imports = [n for top in body if _is_import_block(top) for n in ast.walk(top) if isinstance(n, ast.alias)]
    imported = {a.asname or a.name.split(".")[0] for a in imports}
    classes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
    functions = {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    named = functions.keys() | classes.keys()
    held = {groups.of(name) for name in (needed & data) - named - imported}
    rebinds = "\x00"  # no name's: what a function that rebinds a kept name "changes"
    changes_of = {name: own.get(name, set()) | ({rebinds} if name in rebinding else set()) for name in functions}
    calls = {name: (_used_names(node) - {name}) & named for name, node in functions.items()}
    for name, node in classes.items():
        parts = sanitize_guard.methods(node)
        changes_of[name] = {groups.of(m) for f in parts for m in mutated(f)} & data
        changes_of[name] |= {rebinds} if any(f.name in rebinding for f in parts) else set()
        calls[name] = {u for f in parts for u in _used_names(f)} & named - {name}
    fillers = call_closure.Fillers(changes_of, calls)
    changers = {f for group in [*held, rebinds] for f in fillers.of(group)}

    def of_data(name: str) -> bool:
        return groups.of(name) in held

    bound = data - named
    return any(
        sanitize_guard.changes(n, of_data, named, changers, bound) or sanitize_guard.calls_as_made(n) for n in dropped
    )


def _is_main_guard(node: ast.If) -> bool:
    """``if __name__ == "__main__":`` with no ``else``: what a harness that imports the program never runs. Any
    other test of ``__name__`` (``!=``, or with an ``else``) runs there, and is judged as any statement is."""
    test = node.test
    if node.orelse or not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    name = any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides)
    return name and any(isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)


def _is_import_block(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Try):  # try: import fast_lib / except ImportError: import slow_lib
        body = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        return all(_is_import_block(s) or isinstance(s, ast.Pass) for s in body)
    return False


def _caches(decorator: ast.expr, imports: dict[str, str], functions: set[str]) -> bool:
    """Whether ``decorator`` may be a cache (``functools.lru_cache``, ``cache``, ``memoize``, ``memo.cached``): by a
    name it is written with or imported as (``from functools import cache as memo``), or a decorator of the
    program's own, whose loop that warms it runs as written (round 60: only a written name with "cache" in it
    counted, and a right program's warming loop went). Read from its names, never its printed text, which
    ``ast.unparse`` could not write for some (an f-string holding a no-break space raised, and every completion of
    the group lost its reward: round 58)."""
    for n in ast.walk(decorator):
        named = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if named in functions or any(word in f"{named} {imports.get(named, '')}".lower() for word in ("cache", "memo")):
            return True
    return False


def _only_sets_up(
    function: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str], functions: set[str]
) -> bool:
    """Whether ``function`` takes no argument it must be given and does nothing but set up (its imports too)."""
    arguments = function.args
    if len(arguments.posonlyargs) + len(arguments.args) > len(arguments.defaults) or None in arguments.kw_defaults:
        return False
    known = {**imports, **_imports(function.body)}
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    return bool(body) and all(
        _is_import_block(s) or isinstance(s, (ast.Pass, ast.Global)) or _sets_up(s, known, functions) for s in body
    )


def sanitize(code: str, entry_point: str) -> str:
    """See :func:`_sanitize`; code too deep to read here (a sum of a thousand terms: Python's own parser compiles
    it, this one's recursion does not) or too long (``python_syntax.MAX_READ_CHARS``) is judged as it was
    written, never an error of the whole group."""
    if len(code) > python_syntax.MAX_READ_CHARS:
        return code
    try:
        return _sanitize(code, entry_point)
    except (RecursionError, MemoryError, ValueError):  # ValueError: a tree some step could not read (round 58)
        return code


def _sanitize(code: str, entry_point: str) -> str:
    """``code`` without the top-level statements that ``entry_point`` does not need, and that set nothing up.

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
        tree = python_syntax.parse(code)
    except (SyntaxError, ValueError):
        return code
    body = tree.body
    if not any(entry_point in _defined_names(n) for n in body if not isinstance(n, ast.AugAssign)):
        return code
    imports = _imports(body)
    functions = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} - set(
        imports
    )
    needed = {entry_point}
    defs = {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    setters = {name for name, n in defs.items() if _only_sets_up(n, imports, functions)}
    keep: set[int] = {i for i, n in enumerate(body) if _is_import_block(n)}
    for i, node in enumerate(body):
        if i not in keep and (_sets_up(node, imports, functions, setters) or _registers(node)):
            keep.add(i)
            needed |= _used_names(node)
    # The program's own data (its classes too: ``T.table[i] = ...``), the other names that hold its objects, and what
    # each of its functions changes of it, directly or through another one.
    data = {
        name
        for n in body
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.ClassDef))
        for name in _defined_names(n)
    }
    groups = Groups(
        aliases(n for n in body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    )
    data |= {groups.of(name) for name in data}  # a group's fill is needed as any of its names
    # What a function changes, directly or through the functions it calls (``call_closure``: each function found
    # once, from the names needed; a completion's call graph is the policy's to shape).
    calls = {name: (_used_names(node) - {name}) & defs.keys() for name, node in defs.items()}
    memos = caches(body, groups.of)  # a table a function keeps its results in, and nothing else reads: its cache
    own = {name: {groups.of(m) for m in mutated(n) - memos[name]} & data for name, n in defs.items()}
    fillers = call_closure.Fillers(own, calls)
    cached = {name for name, n in defs.items() if any(_caches(d, imports, functions) for d in n.decorator_list)}
    cached |= {name for name, tables in memos.items() if tables}
    # Grow the needed definitions, and what fills them, until closed under use: each statement read once, kept by
    # the first of its names to be needed.
    # What a statement that reads input or ends the process binds is a demo's: nothing that reads it fills a table.
    # A definition's body runs when called, not here: a helper that exits on a bad row is no demo (round 64).
    demos = {
        name
        for n in body
        if any(isinstance(c, ast.Call) and calls_end(c) for c in at_import(n))
        for name in _defined_names(n)
    }
    keeps: dict[str, list[int]] = {}  # by the name whose need keeps it
    calling: dict[str, list[int]] = {}  # by the function whose changes keep it
    for i, node in enumerate(body):
        if i in keep:
            continue
        demo = demos and _used_names(node) & demos
        filled, called = (set(), set()) if demo else _fills(node, data, defs.keys(), cached, groups, imports)
        for name in _defined_names(node) | filled:
            keeps.setdefault(groups.of(name), []).append(i)
        for function in called:
            calling.setdefault(function, []).append(i)
    new = list(needed)
    while new:
        group = groups.of(new.pop())
        statements = keeps.pop(group, [])
        for function in fillers.of(group):
            statements += calling.pop(function, ())
        for i in statements:
            if i not in keep:
                keep.add(i)
                new.extend(_used_names(body[i]) - needed)
                needed |= _used_names(body[i])
    # A statement that goes must not have changed what stays: one that rebinds a name the kept code needs
    # (``exec``, ``globals()[...] =``, ``del f``, a walrus, a ``match`` capture), or may change in place what it
    # holds, by any road (``sanitize_guard``: round 66), leaves the program as written, as the reference runs it.
    rebinding = rebinders(body, needed)
    dropped = [n for i, n in enumerate(body) if i not in keep and not (isinstance(n, ast.If) and _is_main_guard(n))]
    if dropped and _changed(body, dropped, needed, data, groups, own, rebinding):
        return code
    if any(binds(n, needed, rebinding) for n in dropped):
        return code
    lines = _LINE_END.split(code)
    parts = []
    for i in sorted(keep):
        node = body[i]
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        end = node.end_lineno or node.lineno
        parts.append("\n".join(lines[start - 1 : end]))
    kept = "\n".join(parts)
    # The cut must read back as exactly the statements chosen; where it does not (a statement that goes shares a
    # line with one that stays: ``import os; print(f(1))``), the program is judged as it was written.
    try:
        same = [ast.dump(n) for n in python_syntax.parse(kept).body] == [ast.dump(body[i]) for i in sorted(keep)]
    except (SyntaxError, ValueError):
        same = False
    return kept if same else code
