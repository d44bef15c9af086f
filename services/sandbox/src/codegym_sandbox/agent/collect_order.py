"""The order pytest runs what it collects in: the order the tests define it in, never by name.

Tests may share state between them (a list one test fills and a later one checks, a class attribute, a module
global): run in another order, a test that checks what others gathered runs before them, and passes any program.
pytest takes a module's names from its ``__dict__`` and a class's from each ``__dict__`` of its bases, in the order
they were defined, the bases' before the class's own (a name the class defines again keeps the class's place),
unittest's cases among them.
"""

from __future__ import annotations


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
