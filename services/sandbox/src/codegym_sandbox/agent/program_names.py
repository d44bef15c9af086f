"""The names that cross between the tests and the program: those the tests use, and those the program binds.

The checker asks the program's process only for names that the program itself binds at top level (and the
tests use, and are no builtins): read here from the program's code, by the checker, never from what the
program's process says it has. A name the program binds some other way (``globals()[...]``, ``exec``, a
star import, ``builtins``) is not the program's for the tests: it resolves to the checker's own (a builtin,
a helper of the tests) or is a ``NameError``, as it is for every name the program did not define.
"""

from __future__ import annotations

import dis
import types
import warnings

_STORE_NAME = dis.opmap["STORE_NAME"]  # in the module's own code: a top-level binding
_STORE_GLOBAL = dis.opmap["STORE_GLOBAL"]  # anywhere (``global x`` in a function): one too
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
# Modules that run code when imported (a program may name any module it bound): never imported by the
# checker, which in a test series serves every later run too.
_NOT_IMPORTED = ("this", "antigravity", "idlelib", "turtledemo", "tkinter", "turtle", "webbrowser")


def compiled(source: str) -> types.CodeType | str:
    """The program compiled here, for the program's process to run as it is; or its source, where compiling
    it fails or warns: the program's process compiles it again, and shows the error or warning as
    ``python main.py`` would."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return compile(source, "<program>", "exec", dont_inherit=True)
    except BaseException:
        return source


def top_level_names(program: types.CodeType | str) -> frozenset[str]:
    """The names ``program`` binds at top level (none where it does not compile)."""
    if isinstance(program, str):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = compile(program, "<program>", "exec", dont_inherit=True)
        except BaseException:
            return frozenset()
    return frozenset(_stored(program, top=True))


def _stored(code: types.CodeType, top: bool) -> set[str]:
    """The global names ``code`` stores to (and, in the module's own code, its top-level names)."""
    names = set()
    raw, extended = code.co_code, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | extended
        extended = arg << 8 if op == _EXTENDED_ARG else 0
        if op == _STORE_GLOBAL or (top and op == _STORE_NAME):
            names.add(code.co_names[arg])
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # a class body's STORE_NAME binds the class's, not the module's
            names |= _stored(const, top=False)
    return names


def used_names(code: types.CodeType) -> set[str]:
    """Every name the tests' code could look up (the program's names among them are asked for)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= used_names(const)
    return names


def importable(name: str) -> bool:
    """Whether the checker may import the module ``name`` that the program bound a name to."""
    parts = name.split(".")
    return bool(name) and parts[0] not in _NOT_IMPORTED and not any(p.startswith("__") for p in parts)
