"""The library functions the program's text looks up as it runs, and whether the tests replaced one of them.

In one process (pytest's), a test that patches a library function (``mock.patch("time.sleep")``,
``patch("os.path.exists", return_value=True)``, ``mock_open`` in place of ``builtins.open``,
``monkeypatch.setattr(random, "randint", ...)``, ``patch.object(builtins, "sorted")``) patches it for the program's
calls too, which look it up as they run. Here the program runs in another process, which such a patch never
reaches: a patch that forbids a function (``side_effect=AssertionError``) would pass a program that calls it, and a
stub would fail an honest one. So a call of the program made while the tests have replaced what its text looks up
is refused (``uncarried``), never made. What is carried is left to its carrier: ``input``, ``print`` and the
standard streams (``patched_builtins``), ``sys.argv`` and ``os.environ`` (``shared_state``), and the program's own
names (``mock.patch("solution.fetch")``, ``Checker.set_name``).

What the program looks up as it runs, read from its text (:func:`reads`):

- a builtin it names and never binds itself (``sorted``, ``open``; ``__import__`` where a function of its imports);
- each attribute of a module it imports along the paths its code spells (``os.path.exists`` after ``import os``:
  ``os.path`` and ``os.path.exists``);
- a name a function of its imports from a module (``from time import sleep`` in a function body). A name it imports
  at top level was bound as the program began, before any test ran, as in one process: the tests' later patch of
  ``time.sleep`` is not the program's ``sleep`` there either, and is left alone.

What the tests replace by another road is not seen (open): an attribute the program reads by a computed name
(``getattr(time, name)``), a method of a library's class (``patch.object(requests.Session, "get")``), a module
the program's imports use in turn.

The checker's own code is immune to the tests' patches of builtins (:class:`OwnBuiltins`): while it exchanges with
the program's process, the builtins are its own, as they were before the tests ran (a ``sorted`` patched to raise
tripped the checker's reading of an answer, and failed the honest program that never called it).
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from typing import Any, NamedTuple

from .fixture_requests import TESTS_FILE

_MISSING = object()
_REPLACED = object()  # the value a pair was first seen with is the tests' own: no value of the module's is it
# Carried to the program's process by others (``patched_builtins``, ``shared_state``): never a refusal's reason.
CARRIED = frozenset({"input", "print"})
_CARRIED_ATTRIBUTES = frozenset(
    {"sys.argv", "sys.stdin", "sys.stdout", "sys.stderr", "os.environ", *(f"builtins.{name}" for name in CARRIED)}
)


class Reads(NamedTuple):
    """What the program's text looks up as it runs (see the module's docstring)."""

    builtins: frozenset[str]
    paths: frozenset[tuple[str, tuple[str, ...]]]  # a module's dotted name, and the attributes read along from it
    modules: frozenset[str]  # the top-level packages it imports (``logging``)


NOTHING = Reads(frozenset(), frozenset(), frozenset())


def reads(source: str) -> Reads:
    """What ``source`` looks up as it runs (nothing where it does not parse: it fails before any test)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOTHING
    roots: dict[str, str] = {}  # a name an import binds, to the dotted name of the module it may be
    paths: set[tuple[str, tuple[str, ...]]] = set()
    modules: set[str] = set()
    bound: set[str] = set()
    imports_late = False
    for node, late in _nodes(tree):
        if isinstance(node, ast.Import):
            imports_late = imports_late or late
            for alias in node.names:
                modules.add(alias.name.partition(".")[0])
                root = alias.asname or alias.name.partition(".")[0]
                roots[root] = alias.name if alias.asname else root  # ``import os.path`` binds ``os``
                bound.add(root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports_late = imports_late or late
            modules.add(node.module.partition(".")[0])
            for alias in node.names:
                if alias.name == "*":
                    continue
                name = alias.asname or alias.name
                bound.add(name)
                roots[name] = f"{node.module}.{alias.name}"  # where it names a submodule
                if late:  # looked up as the function runs: the module's attribute, then as it is now
                    paths.add((node.module, (alias.name,)))
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    loaded: set[str] = set()
    for node, _late in _nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loaded.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            spelled = _spelled(node)
            if spelled and spelled[0] in roots:
                paths.add((roots[spelled[0]], spelled[1:]))
    used = {name for name in loaded - bound if hasattr(builtins, name)} | ({"__import__"} if imports_late else set())
    return Reads(frozenset(used - CARRIED), frozenset(paths), frozenset(modules))


def _nodes(tree: ast.AST) -> list[tuple[ast.AST, bool]]:
    """Every node of ``tree``, each with whether it runs only when a function of the program's is called."""
    found: list[tuple[ast.AST, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, late = stack.pop()
        found.append((node, late))
        inner = late or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return found


def _spelled(node: ast.Attribute) -> tuple[str, ...]:
    """``a.b.c`` as ``("a", "b", "c")``; empty where the path does not start at a name."""
    parts: list[str] = []
    at: ast.AST = node
    while isinstance(at, ast.Attribute):
        parts.append(at.attr)
        at = at.value
    return (at.id, *reversed(parts)) if isinstance(at, ast.Name) else ()


class Watch:
    """In the checker, for one run: what the program looks up, as it was before the tests ran (made then), to tell
    at each call whether the tests replaced any of it (:meth:`replaced`)."""

    def __init__(self, read: Reads) -> None:
        self.builtins = [(name, vars(builtins).get(name, _MISSING)) for name in sorted(read.builtins)]
        # Each pair seen: a module's namespace, an attribute, its value before the tests ran, and how the program
        # spells it. A module not imported here yet is followed once it is (by the tests' import, or their patch).
        self.pairs: dict[tuple[int, str], tuple[dict[str, Any], str, object, str]] = {}
        self.pending = sorted(read.paths)
        self._follow(first=True)

    def replaced(self) -> str | None:
        """What the program looks up that the tests replaced now, as the program spells it; else None."""
        space = vars(builtins)
        for name, was in self.builtins:
            if space.get(name, _MISSING) is not was:
                return f"builtins.{name}"
        if self.pending:
            self._follow(first=False)
        for namespace, attribute, was, spelled in self.pairs.values():
            if namespace.get(attribute, _MISSING) is not was:
                return spelled
        return None

    def _follow(self, first: bool) -> None:
        left = []
        for root, path in self.pending:
            module = sys.modules.get(root)
            if not isinstance(module, types.ModuleType):
                left.append((root, path))
                continue
            spelled = root
            for attribute in path:
                namespace, spelled = vars(module), f"{spelled}.{attribute}"
                key = (id(namespace), attribute)
                value = namespace.get(attribute, _MISSING)
                if key not in self.pairs and f"{module.__name__}.{attribute}" not in _CARRIED_ATTRIBUTES:
                    # Seen first after the tests began (a module they imported): a mock or a function of the
                    # tests' there is theirs, not the module's.
                    was = _REPLACED if not first and _tests_own(value) else value
                    self.pairs[key] = (namespace, attribute, was, spelled)
                if not isinstance(value, types.ModuleType):
                    break
                module = value
        self.pending = left


def _tests_own(value: object) -> bool:
    """Whether ``value`` is a mock (``unittest.mock``'s) or a function of the tests' code."""
    if type(value).__module__ == "unittest.mock":
        return True
    code = getattr(value, "__code__", None)
    return isinstance(code, types.CodeType) and code.co_filename == TESTS_FILE


class _Counted(types.ModuleType):
    """The class of the checker's ``builtins`` module (never the program's process's): each attribute set or deleted
    on it (``mock.patch``, ``monkeypatch.setattr``) is counted, so that a call sees at a glance that none was."""

    changes = 0

    def __setattr__(self, name: str, value: Any) -> None:
        _Counted.changes += 1
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        _Counted.changes += 1
        super().__delattr__(name)


class OwnBuiltins:
    """The checker's own builtins (made before the tests run) for its code while it exchanges with the program's
    process (:meth:`own`), the tests' again after (:meth:`theirs`): a callback runs the tests' own code, with
    theirs. ``input`` and ``print`` stay the tests': the program's calls of them ask the tests' patch
    (``patched_builtins``). (A write to ``builtins.__dict__`` itself goes uncounted, and the checker's code may then
    meet it, as before.)"""

    def __init__(self) -> None:
        if type(builtins) is types.ModuleType:
            builtins.__class__ = _Counted
        self.builtins = dict(vars(builtins))  # made in the checker before the tests run: its own
        self.changed: dict[str, object] = {}  # the tests' values of the builtins they replaced or added
        self.seen = -1  # the count of changes when a look last found none of the tests' (a look costs 10 us)

    def own(self) -> None:
        if _Counted.changes == self.seen:
            return
        space, own = vars(builtins), self.builtins
        self.changed = {k: v for k, v in space.items() if own.get(k, _MISSING) is not v and k not in CARRIED}
        self.changed.update((k, _MISSING) for k in own if k not in space and k not in CARRIED)
        self.seen = -1 if self.changed else _Counted.changes
        for name in self.changed:
            if name in own:
                space[name] = own[name]
            else:
                del space[name]

    def theirs(self) -> None:
        space = vars(builtins)
        for name, value in self.changed.items():
            if value is _MISSING:
                space.pop(name, None)
            else:
                space[name] = value
