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
  ``os.path`` and ``os.path.exists``), through a plain alias too (``t = time``: ``t.sleep`` is ``time.sleep``);
  what a top-level alias holds (``sleep = time.sleep``, ``s = sorted``) is used, as its spelling says;
- a module it imports that the tests swap in ``sys.modules`` (``mock.patch.dict``: its import gets theirs);
- everything: every module function and builtin, where its text can reach a module or a builtin by a road it does
  not spell (``__import__``, ``importlib``, ``sys.modules``, ``getattr``, ``vars``, a module's ``__dict__``, a
  module held in a class's attribute, a container or an argument): its text cannot say which it reaches;
- a name a function of its imports from a module (``from time import sleep`` in a function body). A name it imports
  at top level was bound as the program began, before any test ran, as in one process: the tests' later patch of
  ``time.sleep`` is not the program's ``sleep`` there either, and is left alone.

Those roads are spellings, a list: one in none of them (a submodule passed as a value, ``f(os.path)``) is not seen
(open). What the tests replace by another road is not seen (open): a method of a library's class
(``patch.object(requests.Session, "get")``), a module the program's imports use in turn.

The checker's own code is immune to the tests' patches of builtins (:class:`OwnBuiltins`): while it exchanges with
the program's process, the builtins are its own, as they were before the tests ran (a ``sorted`` patched to raise
tripped the checker's reading of an answer, and failed the honest program that never called it).
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from typing import Any, NamedTuple, TypeGuard

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
    anything: bool = False  # whether it can reach a module or a builtin by a road its text does not spell
    loggers: frozenset[str] | None = None  # the loggers it names (``""``: the root); None: any it may reach


NOTHING = Reads(frozenset(), frozenset(), frozenset())
# What reaches a module, a builtin or an attribute by a name that is data, or the module objects themselves.
_DYNAMIC_BUILTINS = frozenset({"__import__", "getattr", "vars", "globals", "locals", "eval", "exec", "compile"})
_DYNAMIC_ATTRIBUTES = frozenset({"__import__", "getattr", "vars", "globals", "eval", "exec"}) | {
    "__dict__", "__builtins__", "__globals__", "modules", "import_module", "f_globals", "f_builtins",
    "__getattribute__", "attrgetter", "methodcaller", "__loader__", "__spec__", "load_module", "exec_module",
}  # fmt: skip
# Those a module's own code rebinds as it runs (a cache, a hook the harness sets), no library function replaced by
# the tests; and the modules of the harness, the checker and the program, whose patches are others' to judge.
_ROUTINES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type)
_UNSWEPT = frozenset({"codegym_sandbox", "solution", "__main__", "warnings", "linecache", "pdb", "doctest"}) | {
    "unittest", "_pytest", "pytest", "pluggy", "tracemalloc", "builtins",
}  # fmt: skip
_LOGGER_ROADS = frozenset({"getChild", "manager", "loggerDict", "Logger", "LoggerAdapter", "setLoggerClass"})
_DYNAMIC_MODULES = frozenset({"importlib", "runpy", "pkgutil", "zipimport", "imp", "inspect", "gc", "ctypes"})


def reads(source: str) -> Reads:
    """What ``source`` looks up as it runs (nothing where it does not parse: it fails before any test)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOTHING
    roots: dict[str, str] = {}  # a name an import binds, to the dotted name of the module it may be
    modules_bound: set[str] = set()  # those an ``import`` binds: a module for certain
    paths: set[tuple[str, tuple[str, ...]]] = set()
    modules: set[str] = set()
    bound: set[str] = set()
    imports_late = anything = False
    for node, late in _nodes(tree):
        if isinstance(node, ast.Import):
            imports_late = imports_late or late
            for alias in node.names:
                modules.add(alias.name.partition(".")[0])
                anything = anything or alias.name.partition(".")[0] in _DYNAMIC_MODULES
                root = alias.asname or alias.name.partition(".")[0]
                roots[root] = alias.name if alias.asname else root  # ``import os.path`` binds ``os``
                modules_bound.add(root)
                bound.add(root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports_late = imports_late or late
            modules.add(node.module.partition(".")[0])
            anything = anything or node.module.partition(".")[0] in _DYNAMIC_MODULES
            for alias in node.names:
                if alias.name == "*":
                    continue
                anything = anything or alias.name in _DYNAMIC_ATTRIBUTES
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
        elif isinstance(node, ast.Attribute):
            anything = anything or node.attr in _DYNAMIC_ATTRIBUTES
    anything = _aliases(tree, roots, modules_bound) or anything
    loaded: set[str] = set()
    for node, _late in _nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loaded.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            spelled = _spelled(node)
            if spelled and spelled[0] in roots:
                paths.add((roots[spelled[0]], spelled[1:]))
    used = {name for name in loaded - bound if hasattr(builtins, name)} | ({"__import__"} if imports_late else set())
    anything = anything or not _DYNAMIC_BUILTINS.isdisjoint(loaded - bound)
    loggers = None if anything else _loggers(tree)
    return Reads(frozenset(used - CARRIED), frozenset(paths), frozenset(modules), anything, loggers)


def _loggers(tree: ast.AST) -> frozenset[str] | None:
    """The loggers the program's text names (``getLogger("app")``; ``getLogger(__name__)``: the program's module,
    ``__main__`` as one file of both, or ``solution``; ``getLogger()`` and ``logging.info``: the root, ``""``), or
    None where it names one by a computed name or walks the loggers (``getLogger(name)``, ``getChild``)."""
    names = {""}
    for node in ast.walk(tree):
        if _spelling(node) in _LOGGER_ROADS:
            return None
        if not isinstance(node, ast.Call) or _spelling(node.func) != "getLogger":
            continue
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
        if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            names.add(arg.value)
        elif isinstance(arg, ast.Name) and arg.id == "__name__":
            names |= {"__main__", "solution"}
        else:
            return None
    return frozenset(names)


def _aliases(tree: ast.AST, roots: dict[str, str], modules_bound: set[str]) -> bool:
    """Resolve the program's plain aliases of a module (``t = time``, ``p = os.path``: ``t.sleep`` is
    ``time.sleep``) into ``roots``; True where it holds a module as a value any other way (in a class's attribute,
    a container, an argument), which the text cannot follow."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    in_class = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body}
    plain: list[tuple[str, ast.Name | ast.Attribute]] = []
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Assign) else None
        if not isinstance(value, (ast.Name, ast.Attribute)) or id(node) in in_class:
            continue
        names = [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
        if len(names) == len(getattr(node, "targets", ())):
            plain.extend((name, value) for name in names)
    followed = set(modules_bound)  # and those bound to a module's attribute (``p = os.path``), maybe a module
    changed = True
    while changed:  # an alias of an alias
        changed = False
        for name, value in plain:
            spelled = (value.id,) if isinstance(value, ast.Name) else _spelled(value)
            if spelled and spelled[0] in followed and name not in followed:
                roots[name] = ".".join((roots[spelled[0]], *spelled[1:]))
                followed.add(name)
                if spelled[0] in modules_bound and len(spelled) == 1:
                    modules_bound.add(name)
                changed = True
    aliased = {id(value) for _, value in plain if isinstance(value, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in modules_bound:
            parent = parents.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.value is node) and id(node) not in aliased:
                return True
    return False


def _spelling(node: ast.AST) -> str | None:
    """The name or the attribute ``node`` spells, if it is either."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


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
    at each call whether the tests replaced any of it (:meth:`replaced`). Where the program can reach a module or a
    builtin by a road its text does not spell (``Reads.anything``), that is every module function and builtin."""

    def __init__(self, read: Reads) -> None:
        self.builtins = [(name, vars(builtins).get(name, _MISSING)) for name in sorted(read.builtins)]
        # Each pair seen: a module's namespace, an attribute, its value before the tests ran, and how the program
        # spells it. A module not imported here yet is followed once it is (by the tests' import, or their patch).
        self.pairs: dict[tuple[int, str], tuple[dict[str, Any], str, object, str]] = {}
        self.modules: dict[str, object] = {}  # each module followed, by the name the program imports it by
        self.pending = sorted(read.paths)
        self.sweep = _Sweep() if read.anything else None
        self._follow(first=True)

    def replaced(self) -> str | None:
        """What the program looks up that the tests replaced now, as the program spells it; else None."""
        space = vars(builtins)
        for name, was in self.builtins:
            if space.get(name, _MISSING) is not was:
                return f"builtins.{name}"
        if self.pending:
            self._follow(first=False)
        for name, module in self.modules.items():
            if sys.modules.get(name, module) is not module:  # ``mock.patch.dict("sys.modules", {"json": fake})``
                return f"sys.modules[{name!r}]"
        for namespace, attribute, was, spelled in self.pairs.values():
            if namespace.get(attribute, _MISSING) is not was:
                return spelled
        return None if self.sweep is None else self.sweep.replaced()

    def _follow(self, first: bool) -> None:
        left = []
        for root, path in self.pending:
            module = sys.modules.get(root)
            if not _is_module(module):
                left.append((root, path))
                continue
            self.modules.setdefault(root, module)
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
                if not _is_module(value):
                    break
                module = value
        self.pending = left


class _Sweep:
    """Every builtin and every function of every module here (the test harness's and the checker's own aside), as
    they were before the tests ran, and those the tests import later as they were first seen: for a program whose
    text cannot say which of them it reaches, any one the tests replaced is one it may use."""

    def __init__(self) -> None:
        self.builtins = dict(vars(builtins))
        self.spaces: dict[str, tuple[object, dict[str, Any], dict[str, object]]] = {}
        self._take(first=True)

    def replaced(self) -> str | None:
        space = vars(builtins)
        for name, was in self.builtins.items():
            if space.get(name, _MISSING) is not was and name not in CARRIED and name != "_":
                return f"builtins.{name}"
        self._take(first=False)
        for name, (module, namespace, copy) in self.spaces.items():
            if sys.modules.get(name, module) is not module:
                return f"sys.modules[{name!r}]"
            for attribute, was in copy.items():
                now = namespace.get(attribute, _MISSING)
                theirs = was is _REPLACED or _tests_own(now) or issubclass(type(was), _ROUTINES)
                # ``sys.unraisablehook``, ``threading.excepthook``: set by the harness for each test.
                carried = f"{name}.{attribute}" in _CARRIED_ATTRIBUTES or attribute.endswith("hook")
                if now is not was and theirs and not carried:
                    return f"{name}.{attribute}"
        for name, module in list(sys.modules.items()):
            if not _is_module(module) and _tests_own(module):
                return f"sys.modules[{name!r}]"
        return None

    def _take(self, first: bool) -> None:
        for name, module in list(sys.modules.items()):
            if name in self.spaces or not _is_module(module) or name.partition(".")[0] in _UNSWEPT:
                continue
            # The module's own namespace, past any ``__dict__`` a module's class defines: a lazy module's
            # (``apipkg``, in the ``py`` library) imports every submodule it promises when that is read.
            namespace = _NAMESPACE.__get__(module)
            # Seen first after the tests began: a mock or a function of the tests' there is theirs.
            copy = {k: (_REPLACED if not first and _tests_own(v) else v) for k, v in list(namespace.items())}
            self.spaces[name] = (module, namespace, copy)


_NAMESPACE = vars(types.ModuleType)["__dict__"]  # a module's namespace, as the interpreter holds it


# The sweep looks at every value of every module: it asks only their types, never the values themselves, since a
# value's ``__getattr__`` or ``__class__`` is code (a deprecation warning that a test's filter makes an error, a
# lookup with effects) that would run in the checker.


def _is_module(value: object) -> TypeGuard[types.ModuleType]:
    return issubclass(type(value), types.ModuleType)


def _tests_own(value: object) -> bool:
    """Whether ``value`` is a mock (``unittest.mock``'s) or a function (or bound method) of the tests' code."""
    kind = type(value)
    if vars(kind).get("__module__") == "unittest.mock":
        return True
    if kind is types.MethodType:
        value = value.__func__  # type: ignore[attr-defined]
    return type(value) is types.FunctionType and value.__code__.co_filename == TESTS_FILE


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
