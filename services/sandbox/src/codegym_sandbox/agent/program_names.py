"""The names that cross between the tests and the program: those the tests use, and those the program binds.

The checker asks the program's process only for names that the program itself binds at top level (and the
tests use, and are no builtins): read here from the program's code, by the checker, never from what the
program's process says it has. A name the program binds some other way (``globals()[...]``, ``exec``, a
star import, ``builtins``) is not the program's for the tests: it resolves to the checker's own (a builtin,
a helper of the tests) or is a ``NameError``, as it is for every name the program did not define.

Some names are never the program's, whatever it binds to them (:func:`asked`): those the tests import
themselves anywhere (a guarded ``try: import numpy as np`` among them), and those the tests use other than by
calling them that name a module (``math.isclose``, ``m = math``, ``getattr(math, "isclose")``: ``math``, an
installed package, a well-known one that is not installed, or a conventional alias such as ``np``). Tests that
use ``math`` without importing it rely on the program's ``import math``: a program that binds ``math`` to an
object of its own would otherwise decide the tests' ``math.isclose``. The checker imports such a module itself
(:func:`module_of`). For the same reason a name the program binds by an import alone (``from collections import
Counter``) is imported by the checker itself, never taken from the program's process; and where the task
declares its entry point, a name the tests use without binding it that a common module of the standard library
exports (``Counter``, ``Fraction``, ``isclose``) is that module's, whatever the program defines by that name:
the tests meant the library's, which an honest program imports (:func:`library_name`).
"""

from __future__ import annotations

import dis
import functools
import importlib.util
import sys
import types
import warnings
from collections.abc import Iterator, Mapping
from typing import NamedTuple

# Starts the tests' text where the task declares names the program's (``assert_runner.read_tests``): a line of
# them. No Python source starts with it.
DECLARED = "\x01"
_STORE_NAME = dis.opmap["STORE_NAME"]  # in the module's own code: a top-level binding
_STORE_GLOBAL = dis.opmap["STORE_GLOBAL"]  # anywhere (``global x`` in a function): one too
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
# Modules that run code when imported (a program may name any module it bound): never imported by the
# checker, which in a test series serves every later run too.
_NOT_IMPORTED = ("this", "antigravity", "idlelib", "turtledemo", "tkinter", "turtle", "webbrowser")
# The names by which code refers to a module without its own name: a notebook's or a prompt's imports.
_ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "nx": "networkx", "sp": "scipy"}
# Packages that tests use by name, installed here or not: where one is missing, a program's class of its name is
# no stand-in for it (an honest program cannot import it either).
_PACKAGES = frozenset(
    {"numpy", "pandas", "scipy", "sympy", "torch", "sklearn", "networkx", "matplotlib", "tensorflow", "jax", "mpmath"}
    | {"sortedcontainers", "more_itertools", "regex", "gmpy2", "numba", "polars", "PIL", "cv2", "yaml", "requests"}
)
# The modules whose names tests use without importing them, relying on the program's import (in this order where
# two export a name): see :func:`library_name`.
_LIBRARY = (
    *("math", "collections", "fractions", "decimal", "itertools", "functools", "heapq", "bisect", "statistics"),
    *("operator", "typing"),
)
# What reads names the tests' code does not name: each makes every name the program binds one the tests may use.
_DYNAMIC = frozenset({"eval", "exec", "globals", "vars", "locals", "getattr", "modules", "__import__", "__dict__"})
_IMPORTS = frozenset(dis.opmap[name] for name in ("IMPORT_NAME", "IMPORT_FROM"))
_IMPORT_NAME, _IMPORT_FROM, _LOAD_CONST = dis.opmap["IMPORT_NAME"], dis.opmap["IMPORT_FROM"], dis.opmap["LOAD_CONST"]
_PUSH_NULL = dis.opmap.get("PUSH_NULL", -1)  # Python 3.11 on: a call's callable follows it (3.13: precedes it)
_NULL_AFTER = sys.version_info >= (3, 13)
_MAKES_FUNCTION = frozenset(dis.opmap[n] for n in ("MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE") if n in dis.opmap)
_LOAD_NAME, _LOAD_GLOBAL = dis.opmap["LOAD_NAME"], dis.opmap["LOAD_GLOBAL"]
_ATTRIBUTES = frozenset(dis.opmap[name] for name in ("LOAD_ATTR", "LOAD_METHOD") if name in dis.opmap)
_CACHE = dis.opmap.get("CACHE", -1)  # an inline cache entry (Python 3.11 on): no instruction
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # LOAD_GLOBAL's low bit says whether it pushes a NULL


def as_file(source: str) -> bytes:
    """The program's text as ``python main.py`` reads it: its bytes, so that an encoding cookie and a leading
    byte-order mark mean what they mean there (a text is compiled as it is, cookie and mark ignored)."""
    return source.encode("utf-8", "surrogatepass")


def compiled(source: str) -> types.CodeType | str:
    """The program compiled here, for the program's process to run as it is; or its source, where compiling
    it fails or warns: the program's process compiles it again, and shows the error or warning as
    ``python main.py`` would."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return compile(as_file(source), "<program>", "exec", dont_inherit=True)
    except BaseException:
        return source


def compiles(source: str) -> bool:
    """Whether ``source`` compiles at all (warnings aside): a SyntaxError is its compile error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(as_file(source), "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    except BaseException:
        return True  # out of recursion or memory: the run's to show, not a compile error
    return True


class Imported(NamedTuple):
    """What a name is bound to by an absolute import: ``module`` itself (``attr`` None), or its ``attr``."""

    module: str
    attr: str | None = None


class Bound(NamedTuple):
    """The names a program binds at top level, and how: ``imports``, those it binds by an absolute import alone
    (each the same import every time); ``functions``, those it binds by ``def`` alone."""

    names: frozenset[str] = frozenset()
    imports: Mapping[str, Imported] = types.MappingProxyType({})
    functions: frozenset[str] = frozenset()


def top_level_names(program: types.CodeType | str) -> Bound:
    """The names ``program`` binds at top level (none where it does not compile), and how."""
    if isinstance(program, str):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = compile(as_file(program), "<program>", "exec", dont_inherit=True)
        except BaseException:
            return Bound()
    names = frozenset(_stored(program, top=True))
    ways: dict[str, set[Imported | str]] = {name: set() for name in names}
    for name, way in _bindings(program):
        ways[name].add(way)
    for name in _stored_globally(program):  # a function rebinds it (``global``): bound no one way
        ways[name].add("global")
    imports = {n: way for n, w in ways.items() if len(w) == 1 and isinstance(way := next(iter(w)), Imported)}
    functions = frozenset(n for n, w in ways.items() if w == {"def"})
    return Bound(names, types.MappingProxyType(imports), functions)


def _bindings(code: types.CodeType) -> Iterator[tuple[str, Imported | str]]:
    """Each top-level binding of the module's own code: the name, and what binds it (an absolute import,
    ``"def"`` or ``"other"``)."""
    ops = list(_ops(code))
    module: tuple[str, bool] | None = None  # the import in progress: its module, and whether it has a fromlist
    attr: str | None = None  # the name its last IMPORT_FROM took
    for i, (op, arg) in enumerate(ops):
        if op == _IMPORT_NAME:
            level, fromlist = (_const(code, ops, i - k) for k in (2, 1))
            module = (code.co_names[arg], fromlist is not None) if level == 0 else None  # a relative one: None
        elif op == _IMPORT_FROM:
            attr = code.co_names[arg]
        elif op == _STORE_NAME:
            name, last = code.co_names[arg], ops[i - 1][0] if i else -1
            if last not in _IMPORTS:
                yield name, "def" if last in _MAKES_FUNCTION else "other"
            elif module is None:
                yield name, "other"
            elif last == _IMPORT_NAME:  # ``import a.b`` binds ``a``
                yield name, Imported(module[0].partition(".")[0])
            else:  # ``from a import b``: its attribute (or submodule) ``b``; ``import a.b as c``: ``a.b``
                yield name, Imported(module[0], attr) if module[1] else Imported(module[0])


def _const(code: types.CodeType, ops: list[tuple[int, int]], i: int) -> object:
    """The constant that instruction ``i`` loads, or a marker where it loads none."""
    if i < 0 or ops[i][0] != _LOAD_CONST:
        return _NO_CONST
    return code.co_consts[ops[i][1]]


_NO_CONST = object()


def _stored_globally(code: types.CodeType) -> set[str]:
    """The names a function (or class body) in ``code`` binds with ``global``."""
    names: set[str] = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _stored(const, top=False)
    return names


def _stored(code: types.CodeType, top: bool) -> set[str]:
    """The global names ``code`` stores to (and, in the module's own code, its top-level names)."""
    names = {code.co_names[arg] for op, arg in _ops(code) if op == _STORE_GLOBAL or (top and op == _STORE_NAME)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # a class body's STORE_NAME binds the class's, not the module's
            names |= _stored(const, top=False)
    return names


def _ops(code: types.CodeType) -> Iterator[tuple[int, int]]:
    """The opcode and argument of each instruction of ``code``'s own bytecode. Read raw: ``dis`` makes an
    object of every instruction, and took 250 ms over tests of 2,000 asserts (their compile takes 55)."""
    raw, extended = code.co_code, 0
    for i in range(0, len(raw), 2):
        op = raw[i]
        if op == _EXTENDED_ARG:
            extended = (raw[i + 1] | extended) << 8
        elif op != _CACHE:
            yield op, raw[i + 1] | extended
            extended = 0


def used_names(code: types.CodeType) -> set[str]:
    """Every name the tests' code could look up (the program's names among them are asked for)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= used_names(const)
    return names


def loaded_names(code: types.CodeType) -> set[str]:
    """The global names ``code`` reads (a call of one among them), in nested code too; not those it only binds."""
    names: set[str] = set()
    for op, arg in _ops(code):
        if op in (_LOAD_NAME, _LOAD_GLOBAL):
            names.add(code.co_names[arg >> _GLOBAL_SHIFT if op == _LOAD_GLOBAL else arg])
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= loaded_names(const)
    return names


def importable(name: str) -> bool:
    """Whether the checker may import the module ``name`` that the program bound a name to."""
    parts = name.split(".")
    return bool(name) and parts[0] not in _NOT_IMPORTED and not any(p.startswith("__") for p in parts)


def asked(
    tests: types.CodeType, program: Bound, builtin: frozenset[str], declared: frozenset[str] = frozenset()
) -> tuple[list[str], dict[str, Imported]]:
    """What the checker takes from the program's process for ``tests``: the names to ask it for, and the
    names it binds that the checker imports itself instead, with what it imports for each.

    ``program``: the names the program binds at top level (:func:`top_level_names`); ``builtin``: the
    builtins' names, which are the checker's own; ``declared``: the task's entry point, always the program's
    (asked whether the program seems to bind it or not, and whatever builtin has its name).
    """
    used = used_names(tests)
    # Tests that look names up as they run (``eval("add(1, 2)")``, ``globals()[name]``) may use any of the
    # program's names: every one is theirs then, and one of them they name nowhere that names a module is the
    # module. Never a name of Python's own (``__builtins__``: bound at the tests' top level, a program's dict
    # would be the tests' builtins).
    dynamic = not _DYNAMIC.isdisjoint(used)
    own = {name for name in (program.names if dynamic else used & program.names) if not (name[:2] == name[-2:] == "__")}
    theirs = (own | declared) - (builtin - declared)
    if not theirs:
        return [], {}
    imports, namespaces, called = _uses(tests)
    theirs -= imports
    taken: dict[str, Imported] = {}
    for name in theirs - declared:
        way = program.imports.get(name)
        if way is not None and module_of(top := way.module.partition(".")[0]) == top:
            taken[name] = way  # the same import, here: never what the program's process made of it
        elif (name in namespaces or name not in called | program.functions) and (module := module_of(name)):
            taken[name] = Imported(module)  # a module's name, used as one (a function's, called, is the program's)
        if declared and name not in taken and way is None and (library := library_name(name)) is not None:
            taken[name] = library
    return sorted(theirs - taken.keys()), taken


def _uses(code: types.CodeType) -> tuple[set[str], set[str], set[str]]:
    """The names an import in ``code`` binds (a name the tests define otherwise may be read from the program
    first: the prompt's helpers take the program's own copies before they bind their names), the global
    names ``code`` reads an attribute of at once (``math.isclose``, ``np.pi``), and those it calls (before
    Python 3.11, which does not mark a call's callable: every name it reads); each in nested code too."""
    imports: set[str] = set()
    namespaces: set[str] = set()
    called: set[str] = set()
    last, loaded = -1, None
    for op, arg in _ops(code):
        if op in (_STORE_NAME, _STORE_GLOBAL) and last in _IMPORTS:
            imports.add(code.co_names[arg])
        elif op in _ATTRIBUTES and loaded is not None:
            namespaces.add(loaded)
        elif op == _PUSH_NULL and loaded is not None and _NULL_AFTER:  # Python 3.13: the callable, then a NULL
            called.add(loaded)
        loaded = None
        if op == _LOAD_GLOBAL:
            loaded = code.co_names[arg >> _GLOBAL_SHIFT]
            if arg & _GLOBAL_SHIFT or _PUSH_NULL == -1:  # it pushes a NULL: a call's callable
                called.add(loaded)
        elif op == _LOAD_NAME:
            loaded = code.co_names[arg]
            if last == _PUSH_NULL or _PUSH_NULL == -1:
                called.add(loaded)
        last = op
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            more = _uses(const)
            imports |= more[0]
            namespaces |= more[1]
            called |= more[2]
    return imports, namespaces, called


def library_name(name: str) -> Imported | None:
    """The module of the standard library's that exports ``name`` among those tests rely on a program to
    import (``Counter``, ``Fraction``, ``isclose``, ``reduce``), or None."""
    if name.startswith("_"):
        return None
    for module in _LIBRARY:
        if hasattr(importlib.import_module(module), name):
            return Imported(module, name)
    return None


@functools.lru_cache(maxsize=1024)  # the same few names, run after run of a series
def module_of(name: str) -> str | None:
    """The module that ``name`` names, as the tests use it: a module of the standard library or one installed
    here (a top-level one, found without importing it), or the module of a conventional alias; else None."""
    if name in _ALIASES:
        return _ALIASES[name]
    if not importable(name):
        return None
    if name in sys.stdlib_module_names or name in _PACKAGES:
        return name
    try:
        return name if importlib.util.find_spec(name) is not None else None
    except (ImportError, ValueError):
        return None
