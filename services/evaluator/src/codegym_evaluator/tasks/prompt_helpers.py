"""The task's own helpers in its trusted test code, so that tests never use a program's copy of them.

A prompt may define helpers beside the function to complete, and the tests call them: HumanEval/32's
``poly``, /38's ``encode_cyclic``, /50's ``encode_shift``, LeetCode's ``list_node`` and ``is_same_tree``.
The program sent to the sandbox starts with the prompt, so a program could redefine a helper next to a wrong
answer (``poly`` that is always 0) and pass. :func:`with_prompt_helpers` puts the prompt's top-level
definitions that the tests use (functions, classes, constants and the prompt's imports; never the function to
complete) at the head of the assert test: the checker runs them itself, and names the test code binds are
its own, whatever the program defines. The program's functions still see the program's definitions.

Objects of a prompt's classes cannot cross to the program (only plain data does): a LeetCode test builds its
inputs with ``list_node([1, 2])`` and its expected values the same way. So when the helpers define a class,
every call the tests make into the program goes through ``_codegym_call``, which rebuilds each argument that a
trusted helper made with the program's helper of the same name and the same arguments (the program's own
``ListNode`` then), while the expected values stay the checker's and are compared by the trusted helpers.
"""

from __future__ import annotations

import ast
import builtins
import functools
from typing import NamedTuple

from codegym_evaluator import python_syntax

# Names this code gives the checker's scope; a program that binds them is overridden before the tests run.
_PREFIX = "_codegym_"

_CONVERSION = """
def _codegym_recorded(name, function):
    def recorded(*args, **kwargs):
        value = function(*args, **kwargs)
        if isinstance(value, _codegym_classes):
            _codegym_made[id(value)] = (value, name, args, kwargs)
        return value
    return recorded


def _codegym_to_program(value):
    if type(value) in (list, tuple):
        return type(value)(_codegym_to_program(v) for v in value)
    if type(value) is dict:
        return {k: _codegym_to_program(v) for k, v in value.items()}
    made = _codegym_made.get(id(value))
    if made is None or made[0] is not value:
        return value
    _, name, args, kwargs = made
    function = _codegym_program.get(name)
    if function is None:
        raise NameError(f"the program has no {name}, which the tests build their inputs with")
    return function(*_codegym_to_program(args), **_codegym_to_program(kwargs))


def _codegym_call(_codegym_function, /, *args, **kwargs):
    return _codegym_function(*_codegym_to_program(args), **_codegym_to_program(kwargs))
"""


def with_prompt_helpers(prompt: str, entry_point: str | None, tests: str) -> str:
    """``tests`` preceded by the top-level definitions of ``prompt`` they use (not ``entry_point``).

    The prompt's star imports alone (LeetCode's prelude) when the tests use nothing else of it. Unchanged
    when the tests use none of it, or when either text does not parse (the sandbox then reports the tests' own
    syntax error, as before).
    """
    return _with_prompt_helpers(prompt, entry_point or "", tests)


class _Prompt(NamedTuple):
    """What every test of a task reads of its prompt, read once (read only: shared by every test's helpers)."""

    tree: ast.Module
    imports: list[ast.stmt]
    definitions: list[ast.stmt]
    binding: dict[str, list[int]]  # name -> the definitions that bind it
    declared: list[str]  # the names the program is to write, which no star import of the prompt's may take


@functools.lru_cache(maxsize=64)  # once for all of a task's tests: read for each, a row of 200 tests took 35 s
def _prompt(prompt: str, entry_point: str) -> _Prompt | None:
    """None where the prompt does not parse (kept too: not read again for each test)."""
    try:
        tree = python_syntax.parse(prompt)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    imports: list[ast.stmt] = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    definitions = [n for n in tree.body if _bound(n) and entry_point not in _bound(n) and not _stub(n)]
    binding: dict[str, list[int]] = {}
    for k, node in enumerate(definitions):
        for name in _bound(node):
            binding.setdefault(name, []).append(k)
    stubs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _stub(n)}
    return _Prompt(tree, imports, definitions, binding, sorted({entry_point} - {""} | stubs))


@functools.lru_cache(maxsize=4096)  # a task's tests are judged once per group, many groups per task
def _with_prompt_helpers(prompt: str, entry_point: str, tests: str) -> str:
    if len(prompt) + len(tests) > python_syntax.MAX_READ_CHARS:
        return tests  # a text past any task's (a provided row is a request's to shape: round 57)
    read = _prompt(prompt, entry_point)
    if read is None:
        return tests
    try:
        return _helped(read, entry_point, tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep to read or write back here
        return tests


def _helped(read: _Prompt, entry_point: str, tests: str) -> str:
    prompt_tree, imports, definitions, binding = read.tree, read.imports, read.definitions, read.binding
    test_tree = python_syntax.parse(tests)
    needed = _names(test_tree)
    new, taken = set(needed), set()
    chosen: list[ast.stmt] = []
    while True:  # what the tests use, and what that uses in turn: each round by the names the last one added
        more = sorted({k for name in new for k in binding.get(name, ()) if k not in taken})
        if not more:
            break
        taken.update(more)
        chosen += [definitions[k] for k in more]
        new = set().union(*(_names(definitions[k]) for k in more)) - needed
        needed |= new
    declared = read.declared
    if not chosen:  # a star import may bind what the tests use: the names it binds are known once it runs
        stars = [_source(n, declared) for n in imports if _star(n)]
        return "\n".join([*stars, tests]) if stars else tests
    # Every import of the prompt (a star import binds names nobody can list) and the definitions, in its order.
    helpers = [n for n in prompt_tree.body if n in chosen or n in imports]
    head = "\n\n".join(_source(n, declared) for n in helpers)
    classes = [n.name for n in chosen if isinstance(n, ast.ClassDef)]
    if not classes:
        return f"{head}\n\n{tests}"
    functions = [n.name for n in chosen if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    trusted = set().union(*(_bound(n) for n in helpers))
    return "\n".join(
        [
            _capture(functions),
            head,
            _CONVERSION,
            f"_codegym_classes = ({', '.join(classes)},)\n_codegym_made = {{}}",
            *(f"{f} = _codegym_recorded({f!r}, {f})" for f in functions),
            ast.unparse(ast.fix_missing_locations(_ProgramCalls(trusted, test_tree).visit(test_tree))),
        ]
    )


def _capture(functions: list[str]) -> str:
    """The program's own helpers, read before the trusted ones take their names: they build the inputs."""
    lines = ["_codegym_program = {}"]
    for f in functions:
        lines += ["try:", f"    _codegym_program[{f!r}] = {f}", "except NameError:", "    pass"]
    return "\n".join(lines)


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement of the prompt binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _source(node: ast.stmt, declared: list[str]) -> str:
    """A statement of the prompt as the tests run it. A star import keeps the names the program is to write
    (``declared``: the entry point, the prompt's stubs), which it would otherwise rebind to the module's: with
    ``from math import *``, tests of the program's ``gcd`` would check ``math.gcd``."""
    text = ast.unparse(node)
    if not _star(node) or not declared:
        return text
    kept = f"_codegym_kept = {{n: v for n, v in globals().items() if n in ({', '.join(map(repr, declared))},)}}"
    return f"{kept}\n{text}\nglobals().update(_codegym_kept)"


def _star(node: ast.stmt) -> bool:
    """A star import: the names it binds are known only once it runs."""
    return isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)


def _stub(node: ast.stmt) -> bool:
    """A function of the prompt with no body beyond a docstring, ``pass`` or ``...``: one the program is to
    write (a second function to complete, or a prompt whose entry point is not known), never a helper."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in node.body
    )


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _ProgramCalls(ast.NodeTransformer):
    """Wraps each call into the program (a name the tests neither define nor import, not a builtin or helper;
    a method of what such a call returned) in ``_codegym_call``."""

    def __init__(self, trusted: set[str], tests: ast.Module) -> None:
        local: set[str] = set()
        for node in ast.walk(tests):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                local |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node in tests.body:
                local.add(node.name)
        self.trusted = trusted | local | set(dir(builtins))

    def _into_program(self, func: ast.expr) -> bool:
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            return root.id not in self.trusted and not root.id.startswith(_PREFIX)
        return isinstance(root, ast.Call)  # Solution().twoSum: a method of the program's object

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not self._into_program(node.func):
            return node
        call = ast.Call(ast.Name("_codegym_call", ast.Load()), [node.func, *node.args], node.keywords)
        return ast.copy_location(call, node)
