"""Renaming: which names change, which never do, and that programs compute the same afterwards."""

from __future__ import annotations

import ast

import pytest
from codegym_data.transform import Rename
from codegym_data.transform.scope import VOCABULARY
from rewrite_support import call, rewrite

RENAME = Rename()

PROGRAM = """
def helper(x):
    doubled = x * 2
    return doubled

def solve(values, *, scale=1):
    total = 0
    for v in values:
        total += helper(v)
    squares = [w * w for w in values]
    return total * scale + sum(squares)
"""


def names(code: str) -> set[str]:
    tree = ast.parse(code)
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return found | {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_locals_comprehension_variables_and_helpers_get_new_names() -> None:
    got = rewrite(RENAME, PROGRAM, keep=frozenset({"solve"}))
    assert got is not None
    assert not names(got) & {"helper", "doubled", "total", "v", "w", "squares"}, got
    tree = ast.parse(got)
    functions = {
        f.name: [a.arg for a in [*f.args.args, *f.args.kwonlyargs]] for f in tree.body if isinstance(f, ast.FunctionDef)
    }
    assert functions["solve"] == ["values", "scale"]  # the entry point and every parameter keep their names
    assert sorted(functions.values()) == [["values", "scale"], ["x"]]
    assert call(got, "solve", [1, 2, 3]) == call(PROGRAM, "solve", [1, 2, 3]) == 26


def test_the_same_seed_gives_the_same_names_and_another_seed_others() -> None:
    keep = frozenset({"solve"})
    first = rewrite(RENAME, PROGRAM, seed=1, keep=keep)
    assert first == rewrite(RENAME, PROGRAM, seed=1, keep=keep)
    assert {rewrite(RENAME, PROGRAM, seed=s, keep=keep) for s in range(5)} != {first}


def test_attributes_keywords_and_builtins_are_not_variables() -> None:
    code = """
    def f(obj):
        total = obj.total
        d = dict(total=total)
        return d["total"] + len([total])
    """
    got = rewrite(RENAME, code)
    assert got is not None and "obj.total" in got and "dict(total=" in got and "len(" in got and "'total'" in got
    assert "total =" not in got


def test_new_names_are_never_names_the_tests_use() -> None:
    # Every word of the vocabulary but one is taken by the tests: that one is used, then numbered names.
    keep = frozenset({*VOCABULARY[1:], "f"})
    got = rewrite(RENAME, "def f():\n    a = 1\n    b = 2\n    return a + b\n", keep=keep)
    assert got is not None
    new = names(got) - {"f"}
    assert "f" in names(got)
    assert VOCABULARY[0] in new and not new & keep and len(new) == 2


@pytest.mark.parametrize(
    ("code", "unchanged"),
    [
        # Names read through strings or frames: nothing is renamed at all.
        ("def f():\n    x = 1\n    return locals()['x']\n", {"x"}),
        ("def f():\n    x = 1\n    return eval('x')\n", {"x"}),
        # A module-level function spelled in a string may be looked up by it.
        (
            """
            import sys
            def helper():
                return 1
            def f():
                return getattr(sys.modules[__name__], 'helper')()
            """,
            {"helper"},
        ),
        # Declared global or nonlocal: the name belongs to another scope too.
        ("counter = 0\ndef f():\n    global counter\n    counter = 1\n    return counter\n", {"counter"}),
        ("def f():\n    n = 0\n    def g():\n        nonlocal n\n        n += 1\n    g()\n    return n\n", {"n"}),
        # Imports keep their names; class attributes and methods are not variables.
        ("def f():\n    import math\n    return math.pi\n", {"math"}),
        ("class A:\n    size = 3\n    def get(self):\n        return self.size\n", {"A", "size", "get"}),
        # The entry point (in keep) and dunder names.
        ("def f():\n    __x = 1\n    return __x\n", {"f", "__x"}),
    ],
)
def test_names_that_must_keep_their_meaning(code: str, unchanged: set[str]) -> None:
    got = rewrite(RENAME, code, keep=frozenset({"f"}))
    assert got is None or unchanged <= names(got), got


def test_scopes_closures_and_class_bodies() -> None:
    code = """
    def f(n):
        base = 10
        def add(k):
            return base + k
        class Box:
            value = base
            def get(self):
                return base
        items = [add(i) for i in range(n)]
        return items, Box.value, Box().get(), (lambda base: base)(1)
    """
    got = rewrite(RENAME, code, keep=frozenset({"f"}))
    assert got is not None and "base" in got  # the lambda's parameter is its own variable and keeps its name
    assert not names(got) & {"add", "items", "i", "Box"}
    assert "value" in got and "get" in got  # the class's attribute and method
    assert call(got, "f", 3) == call(code, "f", 3) == ([10, 11, 12], 10, 10, 1)


def test_a_class_body_assignment_is_not_the_function_variable() -> None:
    # In a class body, a name the body assigns is looked up in the class and then globals, never in the
    # enclosing function, so `x` inside `A` must stay the global x.
    code = (
        "x = 'global'\ndef f():\n    x = 'local'\n    class A:\n        y = x\n        x = 'attr'\n    return A.y, x\n"
    )
    got = rewrite(RENAME, code, keep=frozenset({"f"}))
    assert got is not None and call(got, "f") == call(code, "f") == ("global", "local")


def test_a_program_without_own_names_is_not_applicable() -> None:
    assert rewrite(RENAME, "def f(a, b):\n    return a + b\n", keep=frozenset({"f"})) is None
