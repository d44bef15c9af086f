"""The static check of a writer's program in the code-output game, before the sandbox runs it.

The check keeps the game fair; the sandbox keeps the machine safe. A program may compute only from its own
text, so that it prints the same thing on every run and its output can be worked out by reading it. It is
rejected when it

- does not parse, or is longer than ``MAX_PROGRAM_CHARS``;
- imports a module of ``BANNED_MODULES`` (randomness, time, the OS, processes and threads, files, the
  network, I/O, introspection), directly, as a submodule (``numpy.random``), or by ``from m import random``;
- names a builtin of ``BANNED_NAMES`` (input, code from strings, builtins, object addresses and string
  hashes, which change from run to run), in any role, so that a shadowing trick cannot reach the builtin;
- touches a dunder attribute or name other than ``ALLOWED_DUNDERS`` (``__class__``, ``__subclasses__``
  and ``__globals__`` lead back to everything above);
- never calls ``print``.

What slips through (iterating a set of strings, whose order changes with the hash seed) is caught when the
two runs disagree.
"""

from __future__ import annotations

import ast

from codegym_evaluator import python_syntax

MAX_PROGRAM_CHARS = 1200

BANNED_MODULES = frozenset(
    {
        # randomness and the clock
        *("random", "secrets", "uuid", "time", "datetime", "zoneinfo", "calendar", "timeit", "sched"),
        # the OS, processes and threads
        *("os", "sys", "subprocess", "signal", "platform", "resource", "ctypes", "gc", "atexit", "locale"),
        *("threading", "_thread", "multiprocessing", "concurrent", "asyncio", "faulthandler", "tracemalloc"),
        *("pwd", "grp", "getpass", "posix", "nt"),
        # files, the network and other I/O
        *("io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "mmap", "fcntl", "pty", "tty", "termios"),
        *("socket", "ssl", "select", "selectors", "urllib", "http", "ftplib", "smtplib", "webbrowser"),
        *("pickle", "shelve", "marshal", "sqlite3", "dbm", "zipfile", "tarfile", "gzip", "bz2", "lzma"),
        *("logging", "warnings"),
        # running or inspecting code
        *("builtins", "importlib", "inspect", "types", "code", "codeop", "runpy", "site", "sysconfig", "dis"),
    }
)

BANNED_NAMES = frozenset(
    {
        *("input", "open", "breakpoint", "help", "exit", "quit"),
        *("eval", "exec", "compile", "__import__", "globals", "locals", "vars", "dir"),
        *("getattr", "setattr", "delattr", "memoryview", "id", "hash"),
    }
)

ALLOWED_DUNDERS = frozenset({"__init__", "__name__"})  # a constructor; `if __name__ == "__main__"`


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _module_problems(module: str) -> list[str]:
    banned = [part for part in module.split(".") if part in BANNED_MODULES]
    return [f"imports {module}, which is banned"] if banned else []


def check_program(code: str) -> list[str]:
    """Why ``code`` may not be played, one line per problem; empty when it passes.

    >>> check_program("import math\\nprint(math.factorial(5))")
    []
    >>> check_program("import random\\nprint(random.random())")
    ['imports random, which is banned']
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
                elif alias.name in BANNED_MODULES or alias.name in BANNED_NAMES:
                    problems.append(f"imports {alias.name} from {node.module}, which is banned")
        elif isinstance(node, ast.Name):
            if node.id in BANNED_NAMES:
                problems.append(f"uses {node.id}, which is banned")
            elif _is_dunder(node.id) and node.id not in ALLOWED_DUNDERS:
                problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS:
            problems.append(f"uses the attribute {node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            prints = True
    if not prints:
        problems.append("never calls print")
    return list(dict.fromkeys(problems))
