"""What pytest collects of the tests' scope, and in which order: the order the tests define it in, never by name.

Tests may share state between them (a list one test fills and a later one checks, a class attribute, a module
global): run in another order, a test that checks what others gathered runs before them, and passes any program.
pytest takes a module's names from its ``__dict__`` and a class's from each ``__dict__`` of its bases, in the order
they were defined, the bases' before the class's own (a name the class defines again keeps the class's place),
unittest's cases among them.
"""

from __future__ import annotations

import types

from .fixture_requests import definition
from .program_handle import Handle


def class_members(cls: type) -> list[tuple[str, object]]:
    """``cls``'s attributes (names and values as ``getattr`` gives them) in the order pytest collects them."""
    seen: set[str] = set()
    layers: list[list[str]] = []
    for base in cls.__mro__:
        names = [name for name in list(vars(base)) if name not in seen]
        seen.update(names)
        layers.append(names)
    found = []
    for names in reversed(layers):
        for name in names:
            try:
                found.append((name, getattr(cls, name)))
            except AttributeError:
                continue  # a descriptor that answers on instances alone
    return found


def cases(scope: dict[str, object], unittest: types.ModuleType | None) -> list[type]:
    """unittest's cases the tests define at top level, but those that say ``__test__ = False`` (an abstract base's
    way), which pytest leaves."""
    if unittest is None:
        return []
    return [
        value
        for value in scope.values()
        if isinstance(value, type)
        and issubclass(value, unittest.TestCase)
        and value.__module__ == "__main__"
        and said(value) is not False
    ]


def said(value: object) -> object:
    """What ``value`` says of itself by ``__test__`` (a stand-in for the program's object says nothing)."""
    try:
        return None if isinstance(value, Handle) else getattr(value, "__test__", None)
    except Exception:
        return None


def pytest_name(name: str, value: object, prefixes: str | tuple[str, ...]) -> bool:
    """Whether pytest looks at ``value`` by its name: one of ``prefixes``, or ``__test__ = True`` whatever the name;
    never where it says ``__test__ = False``, nor a fixture of the tests' (``test_input``, a fixture by its name)."""
    found = said(value)
    if found is False or definition(value) is not None:
        return False
    return name.startswith(prefixes) or found is True


def pytest_class(value: type, unittest: types.ModuleType | None) -> bool:
    """A class of the tests' that pytest collects: none with an ``__init__`` (its own or a base's but object's)."""
    if value.__module__ != "__main__" or value.__init__ is not object.__init__:  # type: ignore[misc]
        return False
    return unittest is None or not issubclass(value, unittest.TestCase)
