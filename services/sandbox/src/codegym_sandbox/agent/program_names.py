"""The names that cross between the tests and the program: those the tests use, and those the program binds.

The checker asks the program's process only for names that the program itself binds at top level (and the
tests use, and are no builtins): read here from the program's code, by the checker, never from what the
program's process says it has. A name the program binds some other way (``globals()[...]``, ``exec``, a
star import, ``builtins``) is not the program's for the tests: it resolves to the checker's own (a builtin,
a helper of the tests) or is a ``NameError``, as it is for every name the program did not define.

Two kinds of name are never the program's, whatever it binds to them (:func:`asked`): those the tests
import themselves anywhere (a guarded ``try: import numpy as np`` among them), and those the tests use as a
module (``math.isclose``) that name one (``math``, an installed package, a well-known package that is not
installed, or a conventional alias such as ``np``). Tests that use ``math`` without importing it rely on the
program's ``import math``: a program that binds ``math`` to an object of its own would otherwise decide the
tests' ``math.isclose``. The checker imports such a module itself (:func:`module_of`).

Tests that import the program as a module by name (``from solution import add``: a test file beside the program's,
as KodCode's rows are) take nothing else of its names, as a file of their own would not: only what they import,
through ``program_module``.

Nothing else the program binds is taken from anywhere but the program's process (an import of ``os.system`` as
``helper`` would otherwise run in the checker), but for the types of a few modules made of data alone
(:data:`LIBRARY_TYPES`), which the checker takes as its own.
"""

from __future__ import annotations

import dis
import functools
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import program_bytes

# Starts the tests' text where the task declares names the program's (``assert_runner.read_tests``): a line of
# them. No Python source starts with it.
DECLARED = "\x01"
# Starts the tests' text of a ``pytest`` file (``pytest_file``), before any declared names: its tests are the file's
# test functions and classes, and a run in which none is collected fails, as pytest's does (exit status 5).
WHOLE_FILE = "\x02"
_STORE_NAME = dis.opmap["STORE_NAME"]  # in the module's own code: a top-level binding
_STORE_GLOBAL = dis.opmap["STORE_GLOBAL"]  # anywhere (``global x`` in a function): one too
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
# Modules that run code when imported (a program may name any module it bound): never imported by the
# checker, which in a test series serves every later run too.
# Nor the checker's own modules, which the program could name to have them stand for its names.
_NOT_IMPORTED = (
    *("this", "antigravity", "idlelib", "turtledemo", "tkinter", "turtle", "webbrowser"),
    *("codegym_sandbox", "__main__", "solution"),
)
# The names by which code refers to a module without its own name: a notebook's or a prompt's imports.
_ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "nx": "networkx", "sp": "scipy"}
# Packages that tests use by name, installed here or not: where one is missing, a program's class of its name is
# no stand-in for it (an honest program cannot import it either).
_PACKAGES = frozenset(
    {"numpy", "pandas", "scipy", "sympy", "torch", "sklearn", "networkx", "matplotlib", "tensorflow", "jax", "mpmath"}
    | {"sortedcontainers", "more_itertools", "gmpy2", "numba", "polars", "PIL", "cv2"}
)
# What reads names the tests' code does not name: each makes every name the program binds one the tests may use
# (doctest's finders read every function of a module, and the examples in its docstrings).
_DYNAMIC = frozenset(
    {"eval", "exec", "globals", "vars", "locals", "getattr", "modules", "__import__", "__dict__"}
    | {"testmod", "DocTestFinder", "DocTestSuite"}
)
_IMPORTS = frozenset(dis.opmap[name] for name in ("IMPORT_NAME", "IMPORT_FROM"))
_LOAD_NAME, _LOAD_GLOBAL = dis.opmap["LOAD_NAME"], dis.opmap["LOAD_GLOBAL"]
_LOAD_ATTR = dis.opmap["LOAD_ATTR"]
_ATTRIBUTE_SHIFT = 1 if sys.version_info >= (3, 12) else 0  # LOAD_ATTR's low bit says whether it loads a method
_ATTRIBUTES = frozenset(dis.opmap[name] for name in ("LOAD_ATTR", "LOAD_METHOD") if name in dis.opmap)
_CACHE = dis.opmap.get("CACHE", -1)  # an inline cache entry (Python 3.11 on): no instruction
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # LOAD_GLOBAL's low bit says whether it pushes a NULL


def compiled(source: str) -> types.CodeType | str:
    """The program compiled here, for the program's process to run as it is; or its source, where compiling
    it fails or warns: the program's process compiles it again, and shows the error or warning as
    ``python main.py`` would."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return program_bytes.compile_program(source, "<program>")
    except BaseException:
        return source


def compiles(source: str) -> bool:
    """Whether ``source`` compiles at all (warnings aside): a SyntaxError is its compile error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program_bytes.compile_program(source, "<program>")
    except (SyntaxError, ValueError):
        return False
    except BaseException:
        return True  # out of recursion or memory: the run's to show, not a compile error
    return True


def top_level_names(program: types.CodeType | str) -> frozenset[str]:
    """The names ``program`` binds at top level (none where it does not compile)."""
    if isinstance(program, str):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = program_bytes.compile_program(program, "<program>")
        except BaseException:
            return frozenset()
    return frozenset(_stored(program, top=True))


def own_names(code: types.CodeType) -> frozenset[str]:
    """The names a module's own code binds as it runs (its statements' stores, never a function's ``global``,
    which binds only where it is called)."""
    return frozenset(code.co_names[arg] for op, arg in _ops(code) if op in (_STORE_NAME, _STORE_GLOBAL))


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
    tests: types.CodeType, defined: frozenset[str], builtin: frozenset[str], declared: frozenset[str] = frozenset()
) -> tuple[list[str], dict[str, str]]:
    """What the checker takes from the program's process for ``tests``: the names to ask it for, and the
    names it binds that the tests use as a module, with the module the checker imports for each instead.

    ``defined``: the names the program binds at top level (:func:`top_level_names`); ``builtin``: the
    builtins' names, which are the checker's own; ``declared``: the task's entry point, always the program's
    (asked whether the program seems to bind it or not, and whatever builtin has its name).
    """
    used = used_names(tests)
    # Tests that look names up as they run (``eval("add(1, 2)")``, ``globals()[name]``) may use any of the
    # program's names: every one is theirs then, and one of them they name nowhere that names a module is the
    # module. Never a name of Python's own (``__builtins__``: bound at the tests' top level, a program's dict
    # would be the tests' builtins).
    dynamic = not _DYNAMIC.isdisjoint(used)
    own = {name for name in (defined if dynamic else used & defined) if not (name[:2] == name[-2:] == "__")}
    if imports_program(tests) == "names":
        # Tests that import the program as a module by name (``from solution import add``, ``import solution``),
        # as a test file beside it does, see nothing else of it: a file's names are its own (a ``Counter`` the
        # tests use without importing it is the program's only in one scope, where the program can rig it).
        own = set()
    theirs = (own | declared) - (builtin - declared)
    if not theirs:
        return [], {}
    imports, namespaces = _uses(tests)
    theirs -= imports
    named = (namespaces & theirs) | ((theirs - used - declared) if dynamic else set())
    modules = {name: module for name in named if (module := module_of(name)) is not None}
    return sorted(theirs - modules.keys()), modules


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]
_IMPORTERS = frozenset({"import_module", "__import__", "importorskip", "modules"})
# What follows ``from solution import *``'s IMPORT_NAME: IMPORT_STAR (Python 3.11), or CALL_INTRINSIC_1 (3.12 on).
STAR = frozenset(dis.opmap[name] for name in ("IMPORT_STAR", "CALL_INTRINSIC_1") if name in dis.opmap)


def imports_program(code: types.CodeType) -> str | None:
    """How the tests import the program as the module ``solution`` (``program_module``), anywhere in their code:
    ``"star"`` where one import takes all its names, ``"names"`` where they import it (or names of it) alone,
    else None."""
    # A dynamic import of it by name (``importlib.import_module("solution")``, ``__import__``,
    # ``pytest.importorskip``, ``sys.modules["solution"]``) is one by name too.
    dynamic = "solution" in code.co_consts and not _IMPORTERS.isdisjoint(code.co_names)
    found: str | None = "names" if dynamic else None
    last = ""
    for op, arg in _ops(code):
        if last and op in STAR:
            return "star"
        last = ""
        if op == _IMPORT_NAME and code.co_names[arg].partition(".")[0] == "solution":
            found, last = "names", code.co_names[arg]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner = imports_program(const)
            if inner == "star":
                return inner
            found = found or inner
    return found


# What a module's code does before its first statement that runs code: a docstring bound, imports and the names
# they bind, functions made (never called: a decorator, or an annotation to evaluate, is a name loaded). ``try``
# (a NOP), a jump, a call, a name loaded end it: an import after one of them may be one the tests never reach.
_RUNS_NOTHING = frozenset(
    dis.opmap[name]
    for name in ("RESUME", "LOAD_CONST", "STORE_NAME", "POP_TOP", "IMPORT_NAME", "IMPORT_FROM", "MAKE_FUNCTION")
    if name in dis.opmap
)
_LOAD_CONST = dis.opmap["LOAD_CONST"]
_LOAD_SMALL_INT = dis.opmap.get("LOAD_SMALL_INT", -1)  # an import's level, from Python 3.14 on


def leading_imports(tests: types.CodeType) -> list[tuple[str, tuple[str, ...]]]:
    """The modules the tests' code imports first, before it runs anything else of its own, in order, each with what
    its ``from`` takes (``from xml.dom import minidom`` imports ``xml.dom.minidom`` too): the tests import every one
    of them, whatever the program, or fail at the first that fails. Absolute imports of modules a checker may import
    only (:func:`importable`): never the program's (``solution``)."""
    found: list[tuple[str, tuple[str, ...]]] = []
    consts: list[object] = []  # the last constants loaded: an import's level and names
    last = -1
    for op, arg in _ops(tests):
        if op in STAR and last == _IMPORT_NAME:
            last = op
            continue
        if op not in _RUNS_NOTHING and op != _LOAD_SMALL_INT:
            break
        if op in (_LOAD_CONST, _LOAD_SMALL_INT):
            consts = [*consts[-1:], tests.co_consts[arg] if op == _LOAD_CONST else arg]
        elif op == _IMPORT_NAME:
            name, (level, names) = tests.co_names[arg], ([None, None, *consts])[-2:]
            if level == 0 and importable(name) and (names is None or isinstance(names, tuple)):
                found.append((name, tuple(str(n) for n in names or ())))
        last = op
    return found


def star_names(
    defined: frozenset[str], builtin: frozenset[str], declared: frozenset[str], tests: types.CodeType
) -> list[str]:
    """What the tests' ``from solution import *`` takes from the program: its public top-level names, but never a
    builtin's name, a module's or one the tests import themselves (the task's declared entry point excepted), which
    no test takes from the program by name either (:func:`asked`): ``from math import isclose`` then ``from solution
    import *`` gave a wrong program's ``isclose`` the tests' checks (round 66), as only a pytest file's helpers were
    kept from it (``pytest_file``)."""
    public = {name for name in defined if not name.startswith("_")}
    imported = _uses(tests)[0]
    return sorted(n for n in public if n in declared or (n not in builtin | imported and module_of(n) is None))


def _uses(code: types.CodeType) -> tuple[set[str], set[str]]:
    """The names an import in ``code`` binds (a name the tests define otherwise may be read from the program
    first: the prompt's helpers take the program's own copies before they bind their names), and the global
    names ``code`` reads an attribute of at once (``math.isclose``, ``np.pi``): each in nested code too."""
    imports: set[str] = set()
    namespaces: set[str] = set()
    last, loaded = -1, None
    for op, arg in _ops(code):
        if op in (_STORE_NAME, _STORE_GLOBAL) and last in _IMPORTS:
            imports.add(code.co_names[arg])
        elif op in _ATTRIBUTES and loaded is not None:
            namespaces.add(loaded)
        loaded = None
        if op in (_LOAD_NAME, _LOAD_GLOBAL):
            loaded = code.co_names[arg >> _GLOBAL_SHIFT if op == _LOAD_GLOBAL else arg]
        last = op
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            more = _uses(const)
            imports |= more[0]
            namespaces |= more[1]
    return imports, namespaces


# Modules whose types (and typing's forms) the checker takes as its own where a name of the program's is one
# (``List``, ``Optional``, ``Iterable``): the tests use them in annotations and checks, and they run nothing of
# the program's and nothing outside the run. Not types whose objects the tests pass to the program (a checker's
# ``deque`` is no plain data: ``collections``' stay the program's, made in its process).
LIBRARY_TYPES = frozenset({"typing", "collections.abc"})
# And these of other modules: the tests' ``with redirect_stdout(buf):`` around a call of the program's, where the
# program imported it (a pytest file's imports before its first test are the program's). The program's would take
# the checker's ``buf`` as an argument, which is no plain data (an RE); the checker's own catches what the program
# prints during the call, which reaches the checker's ``sys.stdout`` as it would in one process.
LIBRARY_NAMES = frozenset({("contextlib", "redirect_stdout"), ("contextlib", "redirect_stderr")})


def _library(module: object, name: object) -> bool:
    return module in LIBRARY_TYPES or (module, name) in LIBRARY_NAMES


def library_type(value: Any) -> list[str] | None:
    """Where ``value`` is a type of :data:`LIBRARY_TYPES` (or one of typing's forms) or one of
    :data:`LIBRARY_NAMES`: its module and name."""
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__" if isinstance(value, type) else "_name", None)
    if type(module) is not str or type(name) is not str or not _library(module, name):
        return None
    if not name.isidentifier() or getattr(sys.modules.get(module), name, None) is not value:
        return None  # not the module's own (``List[int]`` is no ``List``)
    return [module, name]


def library_object(module: str, name: str) -> Any:
    """The type ``module.name`` of :data:`LIBRARY_TYPES` (or a form of typing's) or of :data:`LIBRARY_NAMES`, as
    the checker's own; None where there is none (what the program's process answered is its word)."""
    if not _library(module, name) or not name.isidentifier():
        return None
    found = getattr(importlib.import_module(module), name, None)
    return found if library_type(found) == [module, name] else None


def attribute_paths(code: types.CodeType) -> dict[str, set[tuple[str, ...]]]:
    """For each global name ``code`` reads attributes of at once, the attribute paths it reads
    (``xml.dom.minidom.parseString``: ``xml`` -> ``("dom", "minidom", "parseString")``), in nested code too."""
    paths: dict[str, set[tuple[str, ...]]] = {}
    name: str | None = None
    path: list[str] = []
    for op, arg in [*_ops(code), (-1, 0)]:
        if op in _ATTRIBUTES and name is not None:
            path.append(code.co_names[arg >> _ATTRIBUTE_SHIFT if op == _LOAD_ATTR else arg])
            continue
        if name is not None and path:
            paths.setdefault(name, set()).add(tuple(path))
        name, path = None, []
        if op in (_LOAD_NAME, _LOAD_GLOBAL):
            name = code.co_names[arg >> _GLOBAL_SHIFT if op == _LOAD_GLOBAL else arg]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            for key, more in attribute_paths(const).items():
                paths.setdefault(key, set()).update(more)
    return paths


def load_submodules(code: types.CodeType, scope: dict[str, Any], load: Callable[[str], Any]) -> None:
    """Import (with ``load``) the submodules ``code`` reads of the packages in ``scope``
    (``xml.dom.minidom.parseString``, where the program's ``import xml.dom.minidom`` bound ``xml``), as the
    program imported them: paths the tests name, under packages the checker imports."""
    packages = [(n, v) for n, v in scope.items() if isinstance(v, types.ModuleType) and hasattr(v, "__path__")]
    paths = attribute_paths(code) if packages else {}
    for name, package in packages:
        for path in paths.get(name, ()):
            for depth in range(1, len(path) + 1):
                dotted = ".".join((package.__name__, *path[:depth]))
                if dotted not in sys.modules and not importable(dotted):
                    break
                try:
                    load(dotted)
                except ImportError:
                    break


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
