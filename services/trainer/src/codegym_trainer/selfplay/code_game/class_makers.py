"""The part of the code game's static check (``program_check``) that keeps a class's attribute names text.

The names a class is made with are attributes that its methods read, of any object that passes their tests: a
dataclass's generated ``__eq__``, ``__repr__`` and order methods read ``other.<field>``, and a namespace key can
define ``__class__``, so that an object claims any class and passes those tests. A class made from names that are
values (``make_dataclass("D", [name])``, ``type("C", (), namespace)``) reads objects by a name the program
computes, which the attribute rule exists to refuse. So every maker of classes that takes names as values is
called only with names written in the program as string literals, each one an attribute the program may name
(``attribute_rules.attribute_problem``): ``make_dataclass`` (its fields and its ``namespace=``), the functional forms of
``namedtuple``, ``NamedTuple``, ``TypedDict`` and the enum classes (an enum class of the program's has members in
its body: one without members makes classes the same way), and three-argument ``type()`` and other metaclasses
(whose namespace is a dict display), ``typing.Type`` among them. A maker is used only where these rules can see it:
called, a class's base, its ``metaclass=``, or the class of ``isinstance``. The class a one-argument ``type()``
returns is ``type`` itself for a class, and a library's class for its objects (dataclasses' ``Field``): it reaches
no code of the program's (its name read, printed, compared by identity or with builtin classes), so that no
metaclass and no library class is the program's to call or subclass. The names a class's body annotates are its
fields, and its ``__slots__`` its attributes: both pass the attribute rule. A dataclass field's ``name`` is written
only by dataclasses: a program that holds fields writes no attribute ``name``, subclasses no ``Field``, and hands
copy no state to set (``copy.dispatch_table``, a ``__reduce__`` of its own: copy sets the attributes that state
names, of whatever object the reductor returns); ``functools.wraps`` decorates only a function's definition, since
the ``__annotations__`` it copies (parameters' names) are a class's fields. A program defines only the dunders it
may name and the arithmetic (``_ARITHMETIC``): a ``__class__`` property claims any class.

The protocols a class defines (``__eq__``, ``__init__``) are the interpreter's to call, which hands them an object
of their class; a program calls them only through ``super()``: ``C.__eq__(x, y)`` hands any object as ``self``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

AttributeRule = Callable[[str], "str | None"]

# The enum classes of the enum module without members (any other can make no class), and the metaclasses.
_ENUMS = ("Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "ReprEnum")
_METACLASSES = ("type", "Type", "ABCMeta", "EnumMeta", "EnumType", "NamedTupleMeta")  # typing.Type calls type
# Each maker, and where its call holds the names it makes attributes of: a positional index or a keyword, and
# the shape those names take ("names": a string or a list of strings; "fields": also (name, type[, field]) tuples;
# "namespace": a dict's keys; "members": any of these).
MAKERS: dict[str, tuple[int, str, str]] = {
    "make_dataclass": (1, "fields", "fields"),
    "namedtuple": (1, "field_names", "names"),
    "NamedTuple": (1, "", "fields"),  # its other keywords are fields, by their names in the text
    "TypedDict": (1, "", "namespace"),
    **{name: (1, "names", "members") for name in _ENUMS},
    **{name: (2, "", "namespace") for name in _METACLASSES},
}
# Names refused wherever they stand, and why: makers out of reach of the rules above, and what sets attributes
# by names that are values (copy's reductors, of any object; a field class whose ``name`` is a property; an
# enum's members among the globals of a module named by a string).
REFUSED_MAKERS = {
    "new_class": "makes a class from a namespace a function fills: write the class",
    "prepare_class": "makes a class namespace for a function to fill: write the class",
    "Field": "is the class of dataclass fields (a subclass names its fields by a value): use field()",
    "dispatch_table": "hands copy functions whose state sets attributes by name, of any object",
    "global_enum": "sets an enum's members among the globals of the module its __module__ names (a string)",
}
# The names whose rules here read the text around the attribute (a maker called with literal names, a base, a
# decorator): a class pattern's keyword reads an attribute with no text around it, so it names none of them.
# ``type`` is data as an attribute (``token.type``), and the class it may hold is the metaclass's lookup above.
PATTERN_REFUSED = frozenset({*MAKERS, *REFUSED_MAKERS, "wraps", "update_wrapper"}) - {"type"}
# The dunders a program defines (``def``, ``class``) besides those it may name: the arithmetic the interpreter
# calls. Any other is a hook the interpreter or the library calls with what the program could not name itself: a
# ``__class__`` property claims any class; copy sets the attributes a ``__reduce__``'s state names, on whatever
# object it returns; ``__mro_entries__`` puts another class in the place of a base the text shows.
_ARITHMETIC = frozenset(
    {f"__{p}{op}__" for p in ("r", "i") for op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod")}
    | {f"__{p}{op}__" for p in ("r", "i") for op in ("pow", "and", "or", "xor", "lshift", "rshift")}
    | {"__divmod__", "__rdivmod__", "__round__", "__trunc__", "__floor__", "__ceil__", "__complex__", "__bytes__"}
)
# The builtin classes a type() result may be compared with: their comparison runs no code of the program's.
_BUILTIN_CLASSES = frozenset({"bool", "bytes", "complex", "dict", "float", "frozenset", "int", "list", "set", "str"})
_AS_BASES = frozenset({"NamedTuple", "TypedDict", *_ENUMS})  # ``class P(NamedTuple): x: int`` names its fields
_NAMESPACE_KEYWORDS = {"make_dataclass": "namespace"}
_HOLDS_FIELDS = frozenset({"field", "fields", "Field"})
_DATA_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__slots__"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _literal_names(node: ast.expr, shape: str) -> list[str] | None:
    """The names ``node`` holds in the program's text, in the ``shape`` its maker takes; None when any is a value."""
    if isinstance(node, ast.Constant) and node.value is None and shape != "namespace":
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and shape in ("names", "members"):
        return node.value.replace(",", " ").split()
    if isinstance(node, ast.Dict) and shape in ("namespace", "members"):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return keys if len(keys) == len(node.keys) else None  # a None key is ``**other``
    if not isinstance(node, (ast.List, ast.Tuple)) or shape == "namespace":
        return None
    names: list[str] = []
    for item in node.elts:
        first = item.elts[0] if isinstance(item, ast.Tuple) and item.elts and shape != "names" else item
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            return None
        names.append(first.value)
    return names


def _call_problems(call: ast.Call, maker: str, rule: AttributeRule) -> list[str]:
    """A maker's call: every name it makes an attribute of is a literal that passes ``rule``."""
    index, keyword, shape = MAKERS[maker]
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return [f"calls {maker} with unpacked arguments (the names it makes attributes of are data, not text)"]
    lookup = len(call.args) == 1 and not keywords  # ``type(x)``, ``Color(1)``: no class is made
    if lookup and (maker in _METACLASSES or maker in _ENUMS):
        return []
    found = [(call.args[index], shape)] if len(call.args) > index else []
    found += [(keywords[keyword], shape)] if keyword in keywords else []
    if (namespace := _NAMESPACE_KEYWORDS.get(maker)) and namespace in keywords:
        found.append((keywords[namespace], "namespace"))
    if maker in _METACLASSES and (len(call.args) != 3 or keywords):
        found = [(call, shape)]  # only (name, bases, namespace), positionally
    names = [str(k) for k in keywords if maker in ("NamedTuple", "TypedDict") and k != "total"]
    for node, node_shape in found:
        literal = _literal_names(node, node_shape)
        if literal is None:
            return [f"calls {maker} with names that are values: attribute names are string literals of the text"]
        names += literal
    problems = [f"makes with {maker} the attribute {name}: {p}" for name in names if (p := rule(name))]
    if maker in _ENUMS and not any(_functional_member(node) for node, _ in found):
        problems.append(f"makes with {maker} an enum class without members, which makes classes the same way")
    return problems


def _functional_member(names: ast.expr) -> bool:
    """Whether an enum's functional form makes a member: a public name alone (its value a number) or with a
    literal value (a function or a property would be an attribute)."""
    if isinstance(names, ast.Constant):
        return isinstance(names.value, str) and bool(names.value.replace(",", " ").split())
    pairs: list[tuple[ast.expr | None, ast.expr | None]] = []
    if isinstance(names, ast.Dict):
        pairs = list(zip(names.keys, names.values, strict=True))
    elif isinstance(names, (ast.List, ast.Tuple)):
        pairs = [
            (e.elts[0], e.elts[1]) if isinstance(e, ast.Tuple) and len(e.elts) == 2 else (e, None) for e in names.elts
        ]
    return any(
        isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and not name.value.startswith("_")
        and (value is None or _is_literal(value))
        for name, value in pairs
    )


def _is_literal(value: ast.expr) -> bool:
    """A value written out in the text (numbers, strings, tuples of them, arithmetic on them): never a descriptor."""
    kinds = (ast.Constant, ast.Tuple, ast.UnaryOp, ast.BinOp, ast.operator, ast.unaryop, ast.Load)
    return all(isinstance(n, kinds) for n in ast.walk(value))


def _enum_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The program's enum classes: those with an enum class, the module's or its own, among their bases, or the
    enum module's metaclass for theirs."""
    found: dict[str, ast.ClassDef] = {}
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    for _ in classes:
        for node in classes:
            named = [*node.bases, *(k.value for k in node.keywords if k.arg == "metaclass")]
            names = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in named}
            if names & {*_ENUMS, "EnumMeta", "EnumType", *found}:
                found[node.name] = node
    return found


def _has_members(node: ast.ClassDef) -> bool:
    """Whether an enum class's body gives it a member: a public name bound to a literal or to ``auto()`` (and
    no ``_ignore_``, which leaves the names it lists out)."""
    bound = [t for s in node.body for t in (s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)])]
    if any(isinstance(t, ast.Name) and t.id == "_ignore_" for t in bound):
        return False
    for statement in node.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets = [statement.target]
        value = getattr(statement, "value", None)
        public = any(isinstance(t, ast.Name) and not t.id.startswith("_") for t in targets)
        literal = value is not None and _is_literal(value)
        func = value.func if isinstance(value, ast.Call) else None
        auto = (isinstance(func, ast.Name) and func.id == "auto") or (
            isinstance(func, ast.Attribute) and func.attr == "auto"
        )
        if public and (literal or auto):
            return True
    return False


def _class_annotations(node: ast.ClassDef) -> Iterator[str]:
    """The names a class's body annotates, in ``if`` or ``try`` blocks too (they are the class's all the same),
    not those of the functions and classes defined in it."""
    todo: list[ast.AST] = list(node.body)
    while todo:
        statement = todo.pop()
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            yield statement.target.id
        elif isinstance(statement, ast.stmt) and not isinstance(statement, _SCOPES):
            todo += ast.iter_child_nodes(statement)
        elif isinstance(statement, (ast.ExceptHandler, ast.match_case)):
            todo += statement.body


def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _type_result_allowed(call: ast.Call, parent: ast.AST | None, shadowed: set[str]) -> bool:
    """A one-argument ``type()``'s class (``type`` itself, for a class; any library class, such as dataclasses'
    ``Field``) reaches no code of the program's: its name is read, it is printed, or compared by identity or
    with builtin classes (``==`` with an object of the program's would hand it over, as would a lookup in a
    mapping of the program's or a call)."""
    if isinstance(parent, ast.FormattedValue):
        return True
    if isinstance(parent, ast.Attribute):
        return parent.attr in ("__name__", "__qualname__")
    if isinstance(parent, ast.Compare):
        others = [n for n in (parent.left, *parent.comparators) if n is not call]
        plain = all(_builtin_classes(n, shadowed) for n in others)
        return plain or all(isinstance(op, ast.Is | ast.IsNot) for op in parent.ops)
    builtin = {"print", "str", "repr", "isinstance", "issubclass"} - shadowed
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in builtin


def _builtin_classes(node: ast.expr, shadowed: set[str]) -> bool:
    """A builtin class by its name, or a display of them, or another one-argument ``type()``."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_builtin_classes(e, shadowed) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return "type" not in shadowed and len(node.args) == 1 and not node.keywords
    return isinstance(node, ast.Name) and node.id in _BUILTIN_CLASSES - shadowed


def _uses(tree: ast.Module, names: frozenset[str]) -> Iterator[tuple[ast.expr, str]]:
    """Each read of a name in ``names``, bare or as an attribute (``type`` only bare: ``token.type`` is data)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            yield node, node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in names - {"type"}:
            yield node, node.attr


def class_maker_problems(tree: ast.Module, rule: AttributeRule, bound: set[str]) -> list[str]:
    """Why the classes ``tree`` makes may have attribute names that are values; ``bound``: the names it binds."""
    problems: list[str] = []
    enums = _enum_classes(tree)
    problems += [
        f"defines the enum class {n} without a member in its body (such a class makes classes from names)"
        for n, c in enums.items()
        if not _has_members(c)
    ]
    parents = _parents(tree)
    bases: set[int] = set()
    metaclasses: set[int] = set()
    classes_of_isinstance: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases |= {id(b) for b in node.bases}
            metaclasses |= {id(k.value) for k in node.keywords if k.arg == "metaclass"}
            annotated = list(_class_annotations(node))
            problems += [f"annotates the attribute {name} in a class: {p}" for name in annotated if (p := rule(name))]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"isinstance", "issubclass"} - bound
        ):
            classes_of_isinstance |= {id(a) for a in node.args}
        elif (
            isinstance(node, ast.alias)
            and node.name in {*MAKERS, *REFUSED_MAKERS}
            and node.asname not in (None, node.name)
        ):
            problems.append(f"imports {node.name} as {node.asname}")
    for use, name in _uses(tree, frozenset({*MAKERS, *REFUSED_MAKERS})):
        parent = parents.get(id(use))
        if name in REFUSED_MAKERS:
            problems.append(f"uses {name}, which {REFUSED_MAKERS[name]}")
        elif isinstance(parent, ast.Call) and parent.func is use:
            problems += _call_problems(parent, name, rule)
            if (
                name in ("type", "Type")
                and len(parent.args) == 1
                and not _type_result_allowed(parent, parents.get(id(parent)), bound)
            ):
                problems.append("uses the class type() returns other than to read its name, print or compare it")
        elif not (
            (id(use) in bases and name in _AS_BASES)
            or (id(use) in metaclasses and name in _METACLASSES)
            or id(use) in classes_of_isinstance
        ):
            problems.append(f"uses {name} other than called with the names it makes written out in the text")
    return problems


def definition_problems(tree: ast.Module, rule: AttributeRule) -> list[str]:
    """Dunders defined that ``rule`` refuses to name, but ``_ARITHMETIC``, and a class's ``__slots__`` (in its
    body or a namespace display) other than string literals that pass ``rule``: each slot is an attribute."""
    problems: list[str] = []
    for node in ast.walk(tree):
        defined = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else ""
        if defined.startswith("__") and defined.endswith("__") and defined not in _ARITHMETIC and rule(defined):
            problems.append(f"defines {defined}: a program defines the protocols it may name, and arithmetic")
        slots: list[ast.expr | None] = []
        if (
            isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
        ) or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "__slots__"):
            slots.append(node.value)
        elif isinstance(node, ast.Dict):
            # Read from the tree, never its printed text (``ast.unparse`` raised on some keys: round 58).
            slots += [
                v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value == "__slots__"
            ]
        for value in slots:
            names = (
                None
                if value is None
                else _literal_names(value, "namespace" if isinstance(value, ast.Dict) else "names")
            )
            if names is None:
                problems.append("names __slots__ that are values: attribute names are string literals of the text")
            problems += [f"makes the slot {name}: {p}" for name in names or [] if (p := rule(name))]
    return problems


def wrapper_problems(tree: ast.Module) -> list[str]:
    """``functools.update_wrapper`` and ``wraps`` copy a function's ``__annotations__`` (its parameters' names,
    which no attribute rule reads) onto the wrapper, a class too, whose fields they then are: ``wraps`` decorates a
    function's definition only, and ``update_wrapper`` is not used."""
    decorators = {
        id(d) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for d in n.decorator_list
    }
    problems = []
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name == "update_wrapper":
            problems.append("uses update_wrapper, which copies a function's annotations onto any object")
        elif isinstance(node, ast.Call) and _called_name(node) == "wraps" and id(node) not in decorators:
            problems.append("uses wraps other than to decorate a function's definition")
    return problems


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def field_name_problems(tree: ast.Module) -> list[str]:
    """A dataclass field's ``name`` is the attribute that its class's generated methods read, and a subclass's:
    a program that may hold fields writes no attribute called ``name``."""
    holds = any(
        (isinstance(n, ast.Attribute) and n.attr in _HOLDS_FIELDS)
        or (isinstance(n, ast.MatchClass) and not _HOLDS_FIELDS.isdisjoint(n.kwd_attrs))
        or (isinstance(n, ast.ImportFrom) and n.module == "dataclasses" and {a.name for a in n.names} & _HOLDS_FIELDS)
        for n in ast.walk(tree)
    )
    writes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "name" and not isinstance(n.ctx, ast.Load)
    ]
    if holds and writes:
        return [
            "writes an attribute called name in a program that holds dataclass fields (a field's name is the "
            "attribute its class's methods read): call the attribute otherwise"
        ]
    return []


def dunder_call_problems(tree: ast.Module, allowed: frozenset[str], bound: set[str]) -> list[str]:
    """Reads of a protocol of the ``allowed`` dunders (``x.__eq__``, ``C.__init__``) other than through
    ``super()``: the interpreter calls them with an object of their class, a program could hand any as ``self``."""
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        if node.attr not in allowed - _DATA_DUNDERS:
            continue
        owner = node.value
        through_super = isinstance(owner, ast.Call) and not owner.args and not owner.keywords
        called = owner.func if isinstance(owner, ast.Call) else None
        if not (through_super and isinstance(called, ast.Name) and called.id == "super" and "super" not in bound):
            problems.append(f"reads {node.attr} by attribute: the interpreter calls it (len(x), a == b, super())")
    return problems


def class_problems(tree: ast.Module, rule: AttributeRule, allowed: frozenset[str], bound: set[str]) -> list[str]:
    """Every problem of this part of the check: ``rule`` names attributes, ``allowed`` are the dunders a program
    may name, ``bound`` the names it binds."""
    return [
        *class_maker_problems(tree, rule, bound),
        *field_name_problems(tree),
        *wrapper_problems(tree),
        *dunder_call_problems(tree, allowed, bound),
        *definition_problems(tree, rule),
    ]
