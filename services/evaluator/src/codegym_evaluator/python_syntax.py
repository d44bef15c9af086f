"""Every parse of Python source in the evaluator, the trainer and the data tools, one thread at a time.

CPython 3.11 keeps the depth counter of the constructor that turns a parse into ``ast`` objects in state that
every thread shares (python/cpython#106905). Two threads that parse at once (the event loop extracting code
from completions while a worker thread builds a task library or judges a reference) can make one of them fail
with ``SystemError: AST constructor recursion depth mismatch``: a completion that parses would be scored as one
that does not, or a whole batch would fail. One lock makes the parses take turns; each takes well under a
millisecond.
"""

from __future__ import annotations

import ast
import re
import threading
from typing import Literal, overload

# The longest model code the evaluator reads as a tree (to sanitise it, to move its ``__future__`` imports): a MiB
# of dense statements took 7 s and 0.5 GB to parse and walk, on a server's event loop when ``/submit`` sent it
# (round 57). Longer code is judged as it was written; no task's answer comes near.
MAX_READ_CHARS = 256 << 10

# Re-entrant: a parse that a finaliser or a garbage collector's callback starts inside another one waits for
# nothing (it would wait for itself).
_TURNS = threading.RLock()


@overload
def parse(source: str, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...


@overload
def parse(source: str, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


def parse(
    source: str, filename: str = "<unknown>", mode: Literal["exec", "eval"] = "exec"
) -> ast.Module | ast.Expression:
    """``ast.parse(source, filename, mode)``, with no other thread of this process parsing meanwhile."""
    with _TURNS:
        return ast.parse(source, filename, "eval") if mode == "eval" else ast.parse(source, filename)


def literal_eval(text: str) -> object:
    """``ast.literal_eval(text)``, whose parse takes its turn like any other."""
    return ast.literal_eval(parse(text.lstrip(" \t"), mode="eval"))


# A line as Python's parser counts them, its end kept: ``str.splitlines`` ends lines at form feeds, U+2028 and more,
# and cut by its count, a tree's line numbers took the wrong lines (an honest program whose docstring held a U+2028
# lost its ``__future__`` import's place and was CE: round 58).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lines(source: str) -> list[str]:
    """``source``'s lines as ``ast`` numbers them (line ``n`` is ``lines(source)[n - 1]``), each with its end."""
    return _LINE.findall(source)
