"""What the program's text says about its functions, read by the checker from the program's source (never from the
program's process, which could answer anything): a function's docstring, its code object, its signature, its source
lines. Tests that read them (``inspect.getsource``, ``f.__doc__``, ``f.__code__.co_names``, ``dis``,
``inspect.signature``, ``doctest``) read what they would beside the program (``program_function``).

The text says what a name holds only where nothing but one plain ``def`` binds it: one ``def`` at the module's top
level (in a block there too), no decorator, no other binding of the name anywhere (an assignment, an import, a
``global`` store, a ``del``), and nothing in the program that can bind a name or change a function without naming
it (:data:`REBINDS`: ``globals()``, ``setattr``, ``exec``, ``f.__code__ = ...``, frames, ``sys.modules``, pickles).
Every other function of the program's carries none of it, and the tests' reads of it fail (:class:`NotCarried`,
never the checker's own function's text).

The source lines are registered in the checker's ``linecache`` under :data:`FILE`, the file name the code objects
carry: a name in angle brackets, which ``linecache`` never reads from a file (the program writes files in the
checker's directory). ``ast`` and ``inspect`` are imported here only when the tests read a function's text: programs
are forked from the agent, which never imports them.
"""

from __future__ import annotations

import builtins
import dis
import io
import linecache
import types
import warnings
from typing import Any, NamedTuple

from . import program_bytes, program_names

FILE = "<program>"  # the code objects' file name (``program_names.compiled``), and the lines' in linecache
# What can bind a name of the program's, or change a function of its, without the program's text naming the name
# or the attribute: the module's globals (and ways to them: frames, functions' globals, the module itself by name),
# attributes by a computed name, code run from text or from a pickle, and the functions' own attributes set. A list
# of names, so a list: what sets an attribute by a name that is data, or rebuilds an object from parts, and is in
# none of its groups, is open (SECURITY.md).
REBINDS = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "getattr", "setattr", "delattr", "__import__"}
    | {"__dict__", "__globals__", "__builtins__", "__getattribute__", "__setattr__", "__delattr__"}
    | {"__code__", "__defaults__", "__kwdefaults__", "__signature__", "__wrapped__"}
    | {"f_globals", "f_locals", "f_back", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_getframe"}
    | {"modules", "import_module", "reload", "attrgetter", "methodcaller", "update_wrapper", "wraps"}
    | {"make_dataclass", "ctypes", "gc", "pickle", "_pickle", "marshal", "copyreg", "shelve", "dill", "yaml"}
    | {"inspect", "importlib", "builtins", "runpy", "solution", "__main__", "InteractiveInterpreter", "__self__"}
    # What rebuilds an object from a state of attributes by name (copy's and pickle's reductors), makes code or a
    # function from parts, or sets attributes by the names it is given (a descriptor, a mock's patch, a config).
    | {"deepcopy", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__setstate__", "__getstate__"}
    | {"__getnewargs__", "__getnewargs_ex__", "__set__", "__set_name__", "__replace__", "co_consts"}
    | {"FunctionType", "CodeType", "LambdaType", "MethodType", "configure_mock", "dictConfig", "fileConfig"}
    | {"_set_new_attribute", "SimpleNamespace"}
    # Code run from text (a string's statements timed, profiled, traced, debugged or run as examples).
    | {"timeit", "cProfile", "runctx", "bdb", "pdb", "codeop", "compile_command", "run_docstring_examples"}
    | {"DocTestParser", "DocTestRunner", "DocTestFinder", "DocTest", "script_from_examples", "debug_src"}
    # A module it writes and imports (or a process it starts that writes one), whose code is no text of the program's.
    | {"open", "FileIO", "write_text", "write_bytes", "copyfile", "copy2", "copytree", "symlink", "extractall"}
    | {"tempfile", "mkstemp", "NamedTemporaryFile", "subprocess", "system", "popen", "posix_spawn", "fork"}
)
# Modules whose names are also everyday attributes (``xs.copy()``, ``err.code``): rebinding where imported, and,
# for copy, wherever ``.copy`` is anything but a call without arguments (``dataclasses.copy.copy(obj)``); the builtin
# ``compile`` by its name alone (``re.compile`` is no code object).
_REBINDING_MODULES = frozenset({"copy", "types", "code", "trace", "profile", "argparse", "optparse", "unittest"})
# Those the compiler also binds itself (a docstring, an annotated name at the module's or a class's level): read as
# the text names them, an attribute or a name.
_NAMED = frozenset({"__doc__", "__annotations__"})
_CO_FUTURE_ANNOTATIONS = 0x1000000
_STORES = frozenset(dis.opmap[n] for n in ("STORE_NAME", "DELETE_NAME"))
_GLOBAL_STORES = frozenset(dis.opmap[n] for n in ("STORE_GLOBAL", "DELETE_GLOBAL"))
_TYPES = frozenset({"int", "float", "complex", "str", "bytes", "bool", "object", "list", "dict", "set", "tuple"})
_GENERIC = _TYPES | {"frozenset", "type"}


class NotCarried(BaseException):
    """A test read what the checker cannot answer as the program's text would (the code of a decorated function, the
    docstring examples of a class): the run's error. Not an ``Exception``, so that no ``except Exception`` of the
    tests', nor doctest's own reading of a docstring, takes it for an empty answer."""


class SourceText:
    """A default or an annotation that the checker cannot evaluate (it would run the program's code): neither its
    repr (Python's is the value's: ``x=3`` for ``x=K``) nor its equality with any value is the checker's to answer."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        raise NotCarried(f"the program's {self.text!r} is not evaluated by the checker: its value is not carried")

    def __eq__(self, other: object) -> bool:
        raise NotCarried(f"the program's {self.text!r} is not evaluated by the checker: its value is not carried")

    def __hash__(self) -> int:
        return hash(("source", self.text))


class Function(NamedTuple):
    """What the text says of one function: its code object (compiled here, from the text), docstring and AST."""

    code: types.CodeType
    doc: str | None
    node: Any  # its ast.FunctionDef
    future_annotations: bool
    bound: frozenset[str]  # the program's top-level names: a builtin type's name it binds is not the builtin


class _Reading(NamedTuple):
    tree: Any  # the program's ast.Module
    code: types.CodeType
    functions: dict[str, Function]  # those the text says what they are
    examples: frozenset[str]  # the top-level names whose docstrings (their methods' too) hold examples
    dynamic: bool  # whether the program can bind a name, or change a function, without its text naming it


class Text:
    """The program's text, read once, the first time the tests read a function's text (:meth:`function`)."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self._read: list[_Reading | None] = []

    def function(self, name: str) -> Function | None:
        """The text's function ``name``, where nothing but one plain ``def`` binds it; else None."""
        reading = self._reading()
        return None if reading is None else reading.functions.get(name)

    def has_examples(self, name: str) -> bool:
        """Whether a docstring the text gives to ``name`` (a function, a class, its methods) holds examples."""
        reading = self._reading()
        return reading is not None and name in reading.examples

    def uncarried_examples(self) -> frozenset[str]:
        """The program's names whose docstring examples no stand-in carries (a class's, its methods', a decorated
        function's), and ``__doc__`` where its own docstring has examples."""
        reading = self._reading()
        if reading is None:
            return frozenset()
        module = _docstring(reading.tree)
        own = {"__doc__"} if module is not None and ">>>" in module else set()
        return frozenset(reading.examples - reading.functions.keys()) | own

    def every(self) -> tuple[list[str], str | None]:
        """The functions and classes the program defines at top level (by name), and its docstring: the text's where
        nothing else binds ``__doc__``; one with examples that may not be the program's is :class:`NotCarried`."""
        reading = self._reading()
        if reading is None:
            return [], None
        import ast

        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        defined = {n.name for n in ast.walk(reading.tree) if isinstance(n, kinds)}
        names = sorted(defined & program_names.top_level_names(reading.code))
        doc = _docstring(reading.tree)
        if _stores(reading.code).get("__doc__", 0) == (doc is not None) and not reading.dynamic:
            return names, doc
        if doc is not None and ">>>" in doc:
            raise NotCarried("the program's docstring is not carried to the tests: the program may bind another")
        return names, None

    def _reading(self) -> _Reading | None:
        if not self._read:
            self._read.append(_read(self.source) if self.source is not None else None)
        return self._read[0]


def _read(source: str) -> _Reading | None:
    """The program's text read (None where it does not compile), and its lines in ``linecache``."""
    import ast  # in the checker only: see the module's docstring

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = program_bytes.compile_program(source, FILE)
            tree = ast.parse(program_bytes.encode(source), FILE)
            # The lines as Python reads the file: in the encoding it declares (``sorted`` written in UTF-7 is
            # ``sorted`` to a test that reads the source, as to the interpreter), \r\n and \r ending lines too.
            read = program_bytes.decoded(program_bytes.encode(source))
    except BaseException:
        return None
    lines = io.StringIO(read, newline=None).readlines()
    linecache.cache[FILE] = (len(read), None, lines, FILE)  # no mtime: never checked against a file
    named = (getattr(n, "attr", None) or getattr(n, "id", None) for n in ast.walk(tree))
    dynamic = not REBINDS.isdisjoint(program_names.used_names(code)) or _stores_globals(code)
    dynamic = dynamic or not _NAMED.isdisjoint(named) or _rebuilds(tree)
    return _Reading(tree, code, {} if dynamic else _functions(tree, code), _examples(tree), dynamic)


def _rebuilds(tree: Any) -> bool:
    """Whether the program imports a module of :data:`_REBINDING_MODULES`, names ``copy`` or ``compile``, or reaches
    ``copy`` through another's attribute (anything but ``xs.copy()``)."""
    import ast

    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and not n.args and not n.keywords}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.partition(".")[0] in _REBINDING_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] in _REBINDING_MODULES:
            return True
        if isinstance(node, ast.Attribute) and node.attr == "copy" and id(node) not in calls:
            return True
        if isinstance(node, ast.Name) and node.id in ("copy", "compile"):
            return True
    return False


def _stores(code: types.CodeType) -> dict[str, int]:
    """How many instructions of the module's own code bind (or delete) each top-level name."""
    stores: dict[str, int] = {}
    for op, arg in program_names._ops(code):
        if op in _STORES:
            stores[code.co_names[arg]] = stores.get(code.co_names[arg], 0) + 1
    return stores


def _functions(tree: Any, code: types.CodeType) -> dict[str, Function]:
    """The functions that one plain ``def`` at the module's level binds, and nothing else: each with its code
    constant, which the program's process runs as it is."""
    stores = _stores(code)
    defs: dict[str, list[Any]] = {}
    for node in _top_level_defs(tree.body):
        defs.setdefault(node.name, []).append(node)
    consts = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    future = bool(code.co_flags & _CO_FUTURE_ANNOTATIONS)
    bound = program_names.top_level_names(code)
    found: dict[str, Function] = {}
    for name, nodes in defs.items():
        if len(nodes) != 1 or nodes[0].decorator_list or stores.get(name) != 1:
            continue
        made = [c for c in consts if c.co_name == name and c.co_firstlineno == nodes[0].lineno]
        if len(made) == 1:
            doc = made[0].co_consts[0] if _docstring(nodes[0]) is not None and made[0].co_consts else None
            found[name] = Function(made[0], doc if isinstance(doc, str) else None, nodes[0], future, bound)
    return found


def _examples(tree: Any) -> frozenset[str]:
    import ast

    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    names: set[str] = set()
    for node in tree.body:
        docs = (_docstring(inner) for inner in ast.walk(node) if isinstance(inner, kinds))
        if any(doc is not None and ">>>" in doc for doc in docs):
            names |= _names_bound(node)
    return frozenset(names)


def _docstring(node: Any) -> str | None:
    import ast

    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.value.value
    return None


def _top_level_defs(body: list[Any]) -> Any:
    """The functions ``body`` defines at the module's level: in its blocks too, never in functions or classes."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif not isinstance(node, ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                yield from _top_level_defs(getattr(node, field, None) or [])


def _names_bound(node: Any) -> set[str]:
    """The names a top-level statement binds: a function's or a class's, or those its blocks bind."""
    import ast

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return stored | {n.name for n in ast.walk(node) if isinstance(n, kinds)}


def _stores_globals(code: types.CodeType) -> bool:
    """Whether any code of the program's binds or deletes a global (``global f`` then ``f = ...``), or binds names it
    does not name (``from helper import *``)."""
    if any(op in _GLOBAL_STORES or op in program_names.STAR for op, _ in program_names._ops(code)):
        return True
    return any(_stores_globals(const) for const in code.co_consts if isinstance(const, types.CodeType))


def signature(function: Function) -> Any:
    """The function's ``inspect.Signature``, from its AST: defaults and annotations as the values they are where the
    checker can tell them without running the program's code (literals, the builtin types), else their source."""
    import inspect

    args = function.node.args
    p = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [
        p(a.arg, p.POSITIONAL_ONLY if i < len(args.posonlyargs) else p.POSITIONAL_OR_KEYWORD, **_extra(function, a, d))
        for i, (a, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if args.vararg is not None:
        params.append(p(args.vararg.arg, p.VAR_POSITIONAL, **_extra(function, args.vararg, None)))
    params += [
        p(a.arg, p.KEYWORD_ONLY, **_extra(function, a, d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg is not None:
        params.append(p(args.kwarg.arg, p.VAR_KEYWORD, **_extra(function, args.kwarg, None)))
    returns = function.node.returns
    empty = inspect.Signature.empty
    return inspect.Signature(params, return_annotation=empty if returns is None else annotation(function, returns))


def _extra(function: Function, arg: Any, default: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {} if default is None else {"default": value(default)}
    if arg.annotation is not None:
        extra["annotation"] = annotation(function, arg.annotation)
    return extra


def value(node: Any) -> Any:
    """A default's value where it is a literal (``0``, ``None``, ``(1, 2)``), else a :class:`SourceText`."""
    import ast

    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return SourceText(_unparsed(node))


def annotation(function: Function, node: Any) -> Any:
    """An annotation's value: its text under ``from __future__ import annotations``, a builtin type (``int``,
    ``list[int]``, ``int | None``) the program does not rebind, a string; else a :class:`SourceText`."""

    if function.future_annotations:
        return _unparsed(node)
    try:
        return _evaluated(node, function.bound)
    except (ValueError, TypeError, RecursionError):
        return SourceText(_unparsed(node))


def _unparsed(node: Any) -> str:
    """``node``'s text as ``ast.unparse`` writes it, or ``...`` where it cannot: an f-string whose expression holds
    a character it escapes (a no-break space: 3.11's writes no backslash there), or an expression too deep for it.
    A test that asked a right program's signature was RE for it."""
    import ast

    try:
        return ast.unparse(node)
    except (ValueError, RecursionError, MemoryError):
        return "..."


def _evaluated(node: Any, bound: frozenset[str]) -> Any:
    import ast

    if isinstance(node, ast.Constant) and (node.value in (None, Ellipsis) or isinstance(node.value, str)):
        return node.value
    if isinstance(node, ast.Name) and node.id in _GENERIC and node.id not in bound:
        return getattr(builtins, node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _GENERIC:
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        inner = tuple(_evaluated(i, bound) for i in items)
        return _evaluated(node.value, bound)[inner if len(inner) != 1 else inner[0]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _evaluated(node.left, bound) | _evaluated(node.right, bound)
    raise ValueError("not a builtin type")
