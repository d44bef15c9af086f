"""The rules of the code game's check (``program_check``) on the attributes a program names in its text.

An attribute is read by a name written in the text in two ways: ``x.name`` (read, written or deleted) and a class
pattern's keyword (``case Point(x=0)`` reads the subject's ``x``). Both go through ``named_attribute_problems``,
which applies every rule on the name: the name's own (``attribute_problem``: public names and ``ALLOWED_DUNDERS``
only), and those that read the text around the attribute: a ``.format``'s template, the protocols (read only
through ``super()``, ``class_makers``), ``NAMES_AS_DATA``, ``FIELD_READERS`` and the class makers. A keyword has
no text around it (it binds the attribute of whatever the subject is), so it names none of those.
"""

from __future__ import annotations

import ast
import re
import string

from .class_makers import PATTERN_REFUSED

# Attributes of allowed modules and types that reach an attribute by a name in a string, or run code in one, and
# those of frames, code and tracebacks (a generator's frame holds the builtins: ``g.gi_frame.f_builtins``).
BANNED_ATTRIBUTES = frozenset(
    {
        *("attrgetter", "methodcaller", "Formatter", "get_type_hints", "ForwardRef", "format_map"),
        *("gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next"),
        *("f_builtins", "f_globals", "f_locals", "f_back", "f_code", "co_code", "co_consts", "co_names"),
        # An exception's object (``AttributeError.obj``: the module an attribute was missing from), and the
        # names under which modules carry the doors to the machine, whatever the object they are read from.
        *("obj", "sys", "_sys", "os", "_os", "posix", "builtins", "_io", "io", "_bootstrap", "_imp", "importlib"),
    }
)
# Methods refused as attributes (a variable may have their names): an ABC's ``register`` makes any object an
# instance of a class of the program's, whose patterns then read it; singledispatch's evaluates a function's
# annotations, strings the program may compute, as code.
BANNED_METHODS = frozenset({"register"})
# Functions that read attributes named by their arguments, allowed only as called with the objects alone
# (``@functools.wraps(f)``): ``assigned`` and ``updated`` are names, data the check cannot read.
NAMES_AS_DATA = {"wraps": 1, "update_wrapper": 2}
# dataclasses' functions that read every attribute a dataclass's fields name and hand the values back: those names
# are data (``make_dataclass`` takes them as strings, a field's ``name`` may be rewritten), so through a metaclass
# of the program's they read an allowed class's private helper (an enum class's ``_convert_``) by a computed name.
FIELD_READERS = ("asdict", "astuple", "replace")
# The only attributes starting with ``_`` that a program names (``attribute_problem``): a constructor,
# `if __name__ == "__main__"`, and the protocols of values (operators, containers, text, context managers), which
# honest programs define for the interpreter to call (read by attribute only through ``super()``: ``class_makers``).
# Refused are those that lead outward: to a class's relatives (``__class__``, ``__mro__``, ``__subclasses__``), a
# namespace (``__dict__``, ``__globals__``, ``__builtins__``), a method's owner (``__self__``, ``__func__``) or an
# attribute by name (``__getattribute__``).
ALLOWED_DUNDERS = frozenset(
    {
        *("__init__", "__name__", "__qualname__", "__doc__", "__slots__", "__post_init__", "__repr__", "__str__"),
        *("__format__", "__len__", "__bool__", "__hash__", "__iter__", "__next__", "__reversed__", "__contains__"),
        *("__getitem__", "__setitem__", "__delitem__", "__missing__", "__call__", "__enter__", "__exit__"),
        *("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__int__", "__float__", "__index__"),
        *("__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__"),
        *("__floordiv__", "__mod__", "__pow__", "__neg__", "__pos__", "__abs__", "__matmul__"),
        *("__and__", "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__"),
    }
)
# The attributes a class pattern's keyword may not name, though ``x.name`` may: their rules read the text around it.
KEYWORD_REFUSED = frozenset({"format", *ALLOWED_DUNDERS, *NAMES_AS_DATA, *FIELD_READERS, *PATTERN_REFUSED})


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def attribute_problem(name: str) -> str | None:
    """Why a program may not name the attribute ``name`` (read, written or matched), whatever its object; None
    when it may. What an object is shows in the text only where a path starts at a module's name, and an
    allowed module's class or a value one returns carries private helpers that reach past it by names that are
    data (``Enum._convert_`` looks a module up in ``sys.modules``; ``ForwardRef._evaluate`` is ``eval``). So
    only public names and ``ALLOWED_DUNDERS`` are attributes a program names, its own objects' too."""
    if is_dunder(name):
        return None if name in ALLOWED_DUNDERS else f"uses the attribute {name}"
    if name.startswith("_"):
        return f"uses {name}, a private attribute (a program names only public attributes and ALLOWED_DUNDERS)"
    if name in BANNED_ATTRIBUTES | BANNED_METHODS:
        return f"uses {name}, which is banned"
    return None


def named_attribute_problems(name: str, read: ast.Attribute | None) -> list[str]:
    """Every rule on an attribute that the program's text names: ``read`` is the ``x.name`` that names it, or None
    for a class pattern's keyword (``case Point(x=0)``), which reads the attribute of a subject the text does not
    show and binds it with no text around it. Besides the name (``attribute_problem``), the rules on ``format``
    (its template), the protocols (read only through ``super()``), ``NAMES_AS_DATA``, ``FIELD_READERS`` and the
    class makers (``PATTERN_REFUSED``) read the text around an attribute: a keyword names none of them (a
    bound ``str.format`` of a computed template, or a class's ``__init__`` handed any object as ``self``)."""
    if problem := attribute_problem(name):
        return [problem if read is not None else f"matches the attribute {name}: {problem}"]
    if read is not None:
        return format_problems(read) if name == "format" else []
    if name in KEYWORD_REFUSED:
        return [f"matches the attribute {name}, which a program uses only where the text around it shows how"]
    return []


def format_problems(method: ast.Attribute) -> list[str]:
    """A ``.format`` method's template (called or not): a string of the program's own text, whose fields name
    arguments or their items (``{0[1]}``), and whose specs hold only such plain fields (``{:>{width}}``): a field
    with a dot walks attributes by name."""
    template = method.value
    if not isinstance(template, ast.Constant) or not isinstance(template.value, str):
        return ["formats with a template that is not a string of its own text"]
    try:
        parsed = list(string.Formatter().parse(template.value))
    except ValueError:
        return []  # it fails as it runs, the same on every run
    fields = [field for _, field, _, _ in parsed if field is not None]
    inner = [field for _, _, spec, _ in parsed if spec for field in re.findall(r"{([^{}]*)}", spec)]
    if any("." in f for f in fields) or any(not re.fullmatch(r"\w*", f) for f in inner):
        return ["formats with a field that reaches into an attribute"]
    return []
