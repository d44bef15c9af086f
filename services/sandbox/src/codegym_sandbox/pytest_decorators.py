"""The decorators a ``pytest`` file's first test may have (``pytest_file``): a completion is the file's first part,
and its last line can be a decorator of the dataset's first test, which runs in the checker as the tests' code.
"""

from __future__ import annotations

import ast

# The marks and decorators that keep a test from running, or make its failure a pass.
_SKIPS = frozenset({"skip", "skipif", "xfail", "skipIf", "skipUnless", "expectedFailure", "importorskip"})
# The builtins a first test's decorator may call: they make values of values, and are the checker's own (none that
# calls what it is given: ``sorted(key=...)`` would call a name of the program's in the checker).
_DATA_BUILTINS = frozenset(
    {
        "range",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "zip",
        "enumerate",
        "reversed",
        "str",
        "int",
        "float",
        "complex",
        "bool",
        "bytes",
        "len",
        "abs",
        "sum",
        "round",
        "divmod",
        "chr",
        "ord",
        "repr",
        "any",
        "all",
        "None",
        "True",
        "False",
        "Ellipsis",
    }
)
# A test library's objects that a case may hold (besides ``pytest.mark``'s marks).
_CASE_OBJECTS = [["pytest", "param"], ["pytest", "approx"], ["unittest", "mock", "ANY"], ["unittest", "mock", "call"]]


def by_tests(node: ast.stmt, names: dict[str, list[str]], a_test: bool, fixtures: frozenset[str]) -> bool:
    """Whether the decorators of ``node``, the file's first test, are pytest's that change no test into something
    else: its marks (``pytest.mark.parametrize``, ``mark.timeout``) and a fixture's on a fixture, from the names the
    tests' part imports anew; never a mark that skips a test or expects its failure, a fixture's on a test, a
    ``mock.patch`` (rounds 63, 64), a dunder or anything else; their arguments data alone (:func:`_data_only`). A
    completion is the file's first part: its last line can be a decorator of the dataset's first test, which ran in
    the checker as the tests' code (``@(lambda f: lambda: None)`` replaced the test, and a wrong program passed;
    round 60), and so are its marks (``@pytest.mark.skip`` on a file's one parametrized test) and a test made a
    fixture or skipped by another road (``@pytest.fixture``, ``@pytest.mark.__getattr__("skip")``: round 62).
    ``names``: each test library's name the tests' part imports anew, with the path it reaches (``mark``: pytest,
    mark); ``fixtures``: the file's and pytest's (:func:`fixtures`), which its ``parametrize`` may not name."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    for decorator in decorators:
        # One name of the library's, called once at most: what a chain reaches past it is no decorator of a test's
        # (``pytest.mark.foo.args.count`` made the test a method of a tuple's, which no runner collects; round 63).
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        path = _path(func, names)
        if path is None or _SKIPS.intersection(path) or any(p.startswith("_") for p in path):
            return False
        mark = len(path) == 3 and path[:2] == ["pytest", "mark"]
        fixture = path == ["pytest", "fixture"] and not a_test
        # Never a patch: it runs in the checker, and its mock takes the test's first argument (a ``monkeypatch`` the
        # dataset's test feeds the program with became a MagicMock, and the completion chose the input; round 64).
        if not (mark or fixture):
            return False
        if not _data_only(decorator, names):
            return False
        if path[2:] == ["parametrize"] and not _parametrizes_its_own(decorator, node, fixtures):
            return False
    return True


# pytest's own fixtures: a case named for one takes its place (pytest lets it), and the case is the program's.
_BUILTIN_FIXTURES = frozenset(
    {
        "capfd",
        "capfdbinary",
        "caplog",
        "capsys",
        "capsysbinary",
        "doctest_namespace",
        "monkeypatch",
        "pytestconfig",
        "record_property",
        "record_testsuite_property",
        "record_xml_attribute",
        "recwarn",
        "subtests",
        "tmp_path",
        "tmp_path_factory",
        "tmpdir",
        "tmpdir_factory",
    }
)


# And two whose names datasets give their own arguments (an LRU ``cache``, a handler's ``request``; round 66: every
# program failed such a row): a case may take their place where its values are literals alone. No literal stands
# in for either in a test that uses it as pytest's (``request.param``, ``cache.set(...)`` are no literal's), where
# a literal ``[]`` would for ``recwarn`` (``assert not recwarn``) or a string for ``tmp_path`` (a folder the
# program filled at import).
_DATA_NAMED = frozenset({"cache", "request"})


def fixtures(tree: ast.AST) -> frozenset[str]:
    """The names of the fixtures ``tree`` defines (a function with a decorator that names ``fixture``, by its name
    or its ``name=``), and pytest's own."""
    found = set(_BUILTIN_FIXTURES)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if any("fixture" in (getattr(n, "id", "") or getattr(n, "attr", "")) for n in ast.walk(decorator)):
                found.add(node.name)
                found |= {_string(k.value) or "" for k in getattr(decorator, "keywords", []) if k.arg == "name"}
    return frozenset(found)


def _string(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _parametrizes_its_own(decorator: ast.expr, node: ast.stmt, fixtures: frozenset[str]) -> bool:
    """Whether a first test's ``parametrize`` names, as a literal, only arguments the test takes without a default
    and no fixture (``fixtures``): a case named for a fixture takes its place, and ``@pytest.mark.parametrize(
    "capsys", [CAP])`` gave the dataset's test the program's capture, which read what the test expected (round 64).
    pytest refuses an argument the test does not take, or takes with a default; a class's marks reach each test."""
    if not isinstance(decorator, ast.Call):
        return False
    given = decorator.args[:1] + [k.value for k in decorator.keywords if k.arg == "argnames"]
    if len(given) != 1:
        return False
    text = _string(given[0])
    if text is not None:
        argnames = [a.strip() for a in text.split(",") if a.strip()]
    elif isinstance(given[0], (ast.List, ast.Tuple)):
        argnames = [_string(e) or "" for e in given[0].elts]
    else:
        return False
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        taken = {a.arg for a in positional[: len(positional) - len(arguments.defaults)]}
        taken |= {a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is None}
    else:
        taken = set(argnames)
    literal = _literal(decorator.args[1] if len(decorator.args) > 1 else _keyword(decorator, "argvalues"))
    return bool(argnames) and all(
        a in taken and a not in fixtures and (a not in _DATA_NAMED or literal) for a in argnames
    )


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _literal(node: ast.expr | None) -> bool:
    """Whether ``node`` is a literal alone (numbers, strings, and containers of them): plain data, never a value of
    the program's."""
    if node is None:
        return False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _data_only(decorator: ast.expr, names: dict[str, list[str]]) -> bool:
    """Whether the arguments of ``decorator`` (of each call along it) compute nothing but data in the checker:
    literals, values (a table's, the program's), the builtins that make values of values (``range``, ``zip``), a
    case's test library objects (``pytest.param``, ``pytest.mark.slow``, ``pytest.approx``, ``mock.ANY``) and what
    these make. They are code the checker runs: ``@pytest.mark.foo(setattr(...))`` replaced its runner, a patch
    started there replaced the function under test, and a wrong program passed (round 63). Nothing else is called:
    a name the program binds may stand for a class of the standard library's, which is the checker's own
    (``Popen``); a walrus would bind a name of the tests' (``add := ...``); an attribute of a value is its code; a
    comprehension stores to its own names alone."""
    args: list[ast.AST] = []
    node = decorator
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call):
            args += [*node.args, *node.keywords]
        node = node.func if isinstance(node, ast.Call) else node.value
    while args:
        part = args.pop()
        if isinstance(part, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        # A comprehension binds its own names, nothing else: ``(0 for CASES[:] in [[...]])`` rewrote the tests'
        # table of cases when the runner read the first test's (round 64).
        if isinstance(getattr(part, "ctx", None), (ast.Store, ast.Del)) and not isinstance(part, ast.Name):
            return False
        if isinstance(part, ast.Call):
            called = part.func
            if not ((isinstance(called, ast.Name) and called.id in _DATA_BUILTINS) or _a_case_object(called, names)):
                return False
            args += [*part.args, *part.keywords]
        elif isinstance(part, (ast.Name, ast.Attribute)):
            value = isinstance(part, ast.Name) and _a_value(part, names)
            if not (_a_case_object(part, names) or value or (isinstance(part, ast.Attribute) and _constant(part))):
                return False
        else:
            args.extend(ast.iter_child_nodes(part))
    return True


# Constants of the standard library's that a dataset's cases hold (``math.inf``; round 66: every program failed such
# a row). A name the tests use as a module is the checker's own module, whatever the program binds to it
# (``program_names.asked``), and these are plain values of it.
_CONSTANTS = frozenset(
    {("math", name) for name in ("inf", "nan", "pi", "e", "tau")}
    | {("sys", "maxsize")}
    | {("string", name) for name in ("ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "punctuation")}
)


def _constant(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and (node.value.id, node.attr) in _CONSTANTS


def _a_value(name: ast.Name, names: dict[str, list[str]]) -> bool:
    """Whether ``name`` is a value's: no test library's, and no dunder (``__builtins__``, ``__import__``)."""
    return name.id not in names and name.id[:2] != "__"


def _path(node: ast.expr, names: dict[str, list[str]]) -> list[str] | None:
    """What an attribute chain rooted at a test library's name reaches (``pytest.mark.slow``: pytest, mark, slow)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return names[node.id] + attrs[::-1]


def _a_case_object(node: ast.expr, names: dict[str, list[str]]) -> bool:
    """Whether ``node`` reaches a test library's object that a case holds, or a mark of one; nothing that patches."""
    path = _path(node, names)
    if path is None or any(part.startswith("_") for part in path):
        return False
    return (path[:2] == ["pytest", "mark"] and len(path) > 2) or path in _CASE_OBJECTS
