"""The static check of a writer's program in the code-output game, before the sandbox runs it.

The check keeps the game fair; the sandbox keeps the machine safe. A program may compute only from its own
text, so that it prints the same thing on every run and its output can be worked out by reading it. It is
rejected when it

- does not parse, or is longer than ``MAX_PROGRAM_CHARS``;
- imports a module not in ``ALLOWED_MODULES``, modules that only compute (math, itertools, collections, ...):
  the standard library has many doors to files, the machine and the clock besides ``os``, ``io`` and ``time``
  (``linecache``, ``codecs``, ``_io``, ``posixpath``, ``pkgutil``), so what may be imported is listed, not what
  may not;
- names a builtin of ``BANNED_NAMES`` (input, code from strings, builtins, object addresses and string
  hashes, which change from run to run), in any role, so that a shadowing trick cannot reach the builtin, or
  one of ``BANNED_ATTRIBUTES``, which reach an attribute by a name in a string (``operator.attrgetter``,
  ``string.Formatter``, ``typing.get_type_hints``);
- touches a dunder attribute or name other than ``ALLOWED_DUNDERS`` (``__class__``, ``__subclasses__``
  and ``__globals__`` lead back to everything above), or holds one in a string (``'{0.__globals__}'.format(f)``);
- names a private attribute (``x._name``, ``x._name_``, ``self.__name``; read, written or in a class pattern),
  whatever its object: what an object is shows in the text only where a path starts at a module's name, and
  the classes and values allowed modules make carry private helpers that reach past them (an enum class's
  ``_convert_`` makes the globals of a module named by a string its members, a ``ForwardRef``'s ``_evaluate``
  is ``eval``). The program's own objects keep to public names too: in the text they look the same;
- formats with a template that is not a string of its own text, or whose fields reach into attributes or items
  (``'{0.real}'``): ``str.format`` walks attributes by name;
- matches, by a class pattern's keyword, an attribute whose rules read the text around it (``case str(format=f)``
  binds the ``format`` of a computed template, ``case object(__init__=i)`` a protocol to hand any object as
  ``self``): ``x.name`` and ``case C(name=p)`` both go through ``attribute_rules.named_attribute_problems``, and a
  keyword names only public attributes that no rule reads in context (no dunder, ``format``, ``NAMES_AS_DATA``,
  ``FIELD_READERS`` or class maker);
- reaches a module it may not import through an allowed one's attributes (``dataclasses.builtins``,
  ``typing.sys``), or uses an imported module other than as the start of such a path, or imports a private
  name of one (``from typing import _eval_type``);
- reads attributes whose names are values rather than its text: a class pattern's positional sub-patterns read
  those named in the class's ``__match_args__``, which a made dataclass or named tuple takes from computed
  strings, so only the builtins that match themselves (``case int(n)``) take them; ``functools.wraps`` only
  with the object alone, on a function's definition (``assigned`` names, ``__annotations__`` copied onto a class
  are fields), ``update_wrapper`` not at all; dataclasses' ``asdict``, ``astuple`` and ``replace`` not at all
  (``FIELD_READERS``: they read the attributes a dataclass's fields name, which ``make_dataclass`` takes as
  strings and a field's writable ``name`` holds, and a class whose metaclass is such a dataclass inherits an
  allowed class's private helpers). An ABC's ``register``
  (which makes any object an instance of a class of the program's) and singledispatch's (which evaluates
  annotations, strings the program may compute, as code) are refused as attributes (``BANNED_METHODS``);
- makes a class from attribute names that are values (``class_makers``): a class's names are attributes its
  generated methods read of any object that passes their class test, and a namespace key can define
  ``__class__``, so ``make_dataclass``, the functional forms of named tuples, typed dicts and enums and
  three-argument ``type()`` take only names written as string literals that pass the attribute rule, the class
  ``type(x)`` returns reaches no code of the program's, and copy is handed no state to set by name; or defines
  a dunder it may not name but arithmetic (``@property def __class__`` claims any class), or calls a protocol by
  attribute (``C.__eq__(x, y)``, ``x.__len__()``) other than through ``super()``;
- never calls ``print``.

What slips through (iterating a set of strings, whose order changes with the hash seed) is caught when the
two runs disagree, and a door the text does not show ends in an act that ``program_guard`` refuses at run time.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator

from codegym_evaluator import python_syntax

from .attribute_rules import (
    ALLOWED_DUNDERS,
    BANNED_ATTRIBUTES,
    FIELD_READERS,
    NAMES_AS_DATA,
    attribute_problem,
    is_dunder,
    named_attribute_problems,
)
from .class_makers import class_problems

MAX_PROGRAM_CHARS = 1200

ALLOWED_MODULES = frozenset(
    {
        *("math", "cmath", "fractions", "decimal", "numbers", "statistics", "itertools", "functools", "operator"),
        *("collections", "heapq", "bisect", "array", "graphlib", "copy", "dataclasses", "enum", "typing", "abc"),
        *("string", "re", "textwrap", "difflib", "json", "base64", "binascii", "hashlib"),
        "__future__",
    }
)

BANNED_NAMES = frozenset(
    {
        *("input", "open", "breakpoint", "help", "exit", "quit"),
        *("eval", "exec", "compile", "__import__", "globals", "locals", "vars", "dir"),
        *("getattr", "setattr", "delattr", "memoryview", "id", "hash"),
    }
)
# The classes whose class pattern's one positional sub-pattern is the subject itself (``case int(n)``). Any
# other class's positional sub-patterns read the attributes named in its ``__match_args__``: a value, which a
# program can compute (a made dataclass's or named tuple's fields), so they are refused (keywords name the same
# attributes in the text: ``case Point(x=x, y=y)``).
SELF_MATCHING = frozenset(
    {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str", "tuple"}
)

_DUNDER_IN_TEXT = re.compile(r"__\w+__")
_TEXT_DUNDERS = ALLOWED_DUNDERS | {"__main__"}


def _module_problems(module: str) -> list[str]:
    if module.split(".")[0] in ALLOWED_MODULES:
        return []
    return [f"imports {module}, which is banned: a program may import only modules that compute (ALLOWED_MODULES)"]


def _field_reader_problems(value: object, where: str) -> list[str]:
    """``FIELD_READERS``, whatever the name or path ``where`` that reaches ``value``."""
    if not any(value is getattr(dataclasses, name) for name in FIELD_READERS):
        return []
    return [f"uses {where}, which reads the attributes a dataclass's fields name (data, not text): name them"]


def _bound_modules(tree: ast.Module) -> dict[str, object]:
    """The names the program's imports bind to modules (of those it may import), and the modules themselves."""
    bound: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ALLOWED_MODULES - {"__future__"}:
                    with contextlib.suppress(ImportError):
                        top = alias.asname or alias.name.split(".")[0]
                        bound[top] = importlib.import_module(alias.name if alias.asname else top)
    for name, value in _imported_from(tree):
        if inspect.ismodule(value):
            bound[name] = value
    return bound


def _imported_from(tree: ast.Module) -> Iterator[tuple[str, object]]:
    """What each ``from <allowed> import name`` binds: the name it binds, and the value."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in ALLOWED_MODULES:
            for alias in node.names:
                with contextlib.suppress(ImportError):
                    value = getattr(importlib.import_module(node.module or ""), alias.name, None)
                    yield alias.asname or alias.name, value


def _parameter_uses(tree: ast.Module, names: set[str]) -> set[int]:
    """The uses of ``names`` that are a function's parameter where they stand (``def is_pal(string)`` beside
    ``import string``), not the module: ids of their ``Name`` nodes. A default, a decorator or an annotation is
    read where the function is made, and a name a function declares ``global`` or ``nonlocal`` is not its own."""
    found: set[int] = set()

    def visit(node: ast.AST, hidden: frozenset[str]) -> None:
        if isinstance(node, ast.Name) and node.id in hidden:
            found.add(id(node))
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                visit(child, hidden)
            return
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
        outside: list[ast.AST | None] = [*a.defaults, *a.kw_defaults, *(p.annotation for p in params)]
        if not isinstance(node, ast.Lambda):
            outside += [*node.decorator_list, node.returns]
        for made in outside:
            if made is not None:
                visit(made, hidden)
        declared = {n for d in ast.walk(node) if isinstance(d, (ast.Global, ast.Nonlocal)) for n in d.names}
        inner = (hidden | ({p.arg for p in params} & names)) - declared
        for child in node.body if isinstance(node.body, list) else [node.body]:
            visit(child, frozenset(inner))

    visit(tree, frozenset())
    return found


def _module_use_problems(tree: ast.Module) -> list[str]:
    """A module the program may import carries others as attributes (``dataclasses.builtins``, ``typing.sys``):
    every attribute path from an imported module is followed as it resolves, and one that reaches a module the
    program may not import is rejected. So that every use is such a path, a module, named or reached through
    another's attribute, is only ever the start of one (``d = dataclasses``, ``f(typing)``, ``e = re.enum``, a
    parameter's default ``t=re.enum`` would carry it where it is not followed)."""
    bound = _bound_modules(tree)
    if not bound:
        return []
    problems = [  # ``from dataclasses import builtins``: a module of an allowed one's, bound by its name
        f"imports the module {module.__name__} as {name}, which is banned"  # type: ignore[attr-defined]
        for name, module in bound.items()
        if module.__name__.split(".")[0] not in ALLOWED_MODULES  # type: ignore[attr-defined]
    ]
    starts = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    parameters = _parameter_uses(tree, set(bound))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and node.id in bound
            and isinstance(node.ctx, ast.Load)
            and id(node) not in starts | parameters
        ):
            problems.append(f"uses the module {node.id} other than by its attributes")
        if not isinstance(node, ast.Attribute):
            continue
        path, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            path.insert(0, root.attr)
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in bound or id(root) in parameters:
            continue
        if any(step.startswith("_") for step in path):
            continue  # refused by the name alone (``attribute_problem``), or an allowed dunder of the module's
        value = bound[root.id]
        for at, step in enumerate(path, 1):
            value = getattr(value, step, None)
            through = ".".join([root.id, *path[:at]])
            if inspect.ismodule(value) and value.__name__.split(".")[0] not in ALLOWED_MODULES:
                problems.append(f"reaches the module {value.__name__} through {through}, which is banned")
                break
            if reads := _field_reader_problems(value, through):
                problems += reads
                break
        else:
            if inspect.ismodule(value) and id(node) not in starts:  # ``e = re.enum`` then ``e.sys``
                through = ".".join([root.id, *path])
                problems.append(f"uses the module {through} other than by its attributes")
    return problems


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the program binds anywhere: an assignment, a definition, a parameter, an import, a capture."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.partition(".")[0])
        elif isinstance(node, (ast.MatchAs, ast.MatchStar, ast.ExceptHandler)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _names_as_data_problems(tree: ast.Module) -> list[str]:
    """Class patterns with positional sub-patterns, and ``NAMES_AS_DATA`` used other than called with the
    objects alone: each reads attributes whose names are values, not the program's text."""
    bound = _bound_names(tree)
    problems: list[str] = []
    called: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass) and node.patterns:
            cls = node.cls
            if not (isinstance(cls, ast.Name) and cls.id in SELF_MATCHING - bound):
                problems.append(
                    f"matches {_shown(cls)} by position, which reads the attributes its __match_args__ names "
                    f"(a value, not text): name them as keywords"
                )
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            plain = not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
            if name in NAMES_AS_DATA and plain and len(node.args) == NAMES_AS_DATA[name]:
                called.add(id(func))
        elif isinstance(node, ast.alias) and node.name in NAMES_AS_DATA and node.asname not in (None, node.name):
            problems.append(f"imports {node.name} as {node.asname}")
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name in NAMES_AS_DATA and id(node) not in called:
            problems.append(f"uses {name} other than called with the objects alone (the names it copies are data)")
    return problems


def check_program(code: str) -> list[str]:
    """Why ``code`` may not be played, one line per problem; empty when it passes.

    >>> check_program("import math\\nprint(math.factorial(5))")
    []
    >>> check_program("import random\\nprint(random.random())")
    ['imports random, which is banned: a program may import only modules that compute (ALLOWED_MODULES)']
    """
    if len(code) > MAX_PROGRAM_CHARS:
        return [f"{len(code)} characters, more than {MAX_PROGRAM_CHARS}"]
    try:
        tree = python_syntax.parse(code)
    except (SyntaxError, ValueError) as exc:
        return [f"does not parse: {exc}"]
    problems: list[str] = []
    prints = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                problems += _module_problems(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append("a relative import")
            problems += _module_problems(node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    problems.append(f"from {node.module} import *")
                elif alias.name in BANNED_NAMES | BANNED_ATTRIBUTES:
                    problems.append(f"imports {alias.name} from {node.module}, which is banned")
                elif alias.name.startswith("_") and node.module != "__future__":
                    problems.append(f"imports {alias.name}, a private name of {node.module}")
        elif isinstance(node, ast.Name):
            if node.id in BANNED_NAMES | BANNED_ATTRIBUTES:
                problems.append(f"uses {node.id}, which is banned")
            elif is_dunder(node.id) and node.id not in ALLOWED_DUNDERS:
                problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute):
            problems += named_attribute_problems(node.attr, node)
        elif isinstance(node, ast.MatchClass):  # ``case Point(x=0)`` reads the attribute ``x`` of the subject
            problems += [p for name in node.kwd_attrs for p in named_attribute_problems(name, None)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = set(_DUNDER_IN_TEXT.findall(node.value)) - _TEXT_DUNDERS
            problems += [f"holds {name} in a string" for name in sorted(named)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            prints = True
    problems += _module_use_problems(tree)
    problems += [p for name, value in _imported_from(tree) for p in _field_reader_problems(value, name)]
    problems += _names_as_data_problems(tree)
    problems += class_problems(tree, attribute_problem, ALLOWED_DUNDERS, _bound_names(tree))
    if not prints:
        problems.append("never calls print")
    return list(dict.fromkeys(problems))


def _shown(node: ast.expr) -> str:
    """``node``'s text for a message: ``ast.unparse``'s, or a stand-in where it cannot write it (an f-string that
    holds a no-break space raised, and the round's every answer with it: round 58)."""
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):
        return "a class"
