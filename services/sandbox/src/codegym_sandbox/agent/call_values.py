"""The mutable values of one call of the program's, numbered alike by the checker and the program's process."""

from __future__ import annotations

from typing import Any


class Aliases:
    """The mutable values (lists, dicts, sets, bytearrays, numpy arrays) of one call, numbered in the order they are
    first written or read: the call's arguments, then what it returned and what it changed of them.

    Both sides number them alike, so ``["a", n]`` is the n-th of them wherever it is: a list the program was
    given and returned (``b is a`` holds in the tests), one list that a result holds twice (``[[0] * n] * n``, one
    row changed changes each), a list that holds itself. Without them, each place would cross as a copy.
    """

    def __init__(self) -> None:
        self.values: list[Any] = []  # held: an id stays the value's while it is here
        self._at: dict[int, int] = {}

    def at(self, value: Any) -> int | None:
        return self._at.get(id(value))

    def add(self, value: Any) -> Any:
        self._at[id(value)] = len(self.values)
        self.values.append(value)
        return value

    def reserve(self) -> int:
        """A number for a value made once what it holds is read (a numpy array of objects), set by :meth:`put`."""
        self.values.append(None)
        return len(self.values) - 1

    def put(self, at: int, value: Any) -> Any:
        self._at[id(value)] = at
        self.values[at] = value
        return value

    def cut(self, count: int) -> None:
        """Forget the values numbered from ``count`` on (those of a result that was never sent)."""
        for value in self.values[count:]:
            self._at.pop(id(value), None)
        del self.values[count:]
