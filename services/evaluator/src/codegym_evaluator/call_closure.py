"""Which of a program's functions may change a name when called: the ones that change it themselves, and every
function that calls one of them, directly or not, found by walking the call graph backwards from the name.

Sanitising asks which top-level calls fill a table the kept code reads (``sanitize``). Grown forwards instead, as
each function's set of every name it reaches, the work was the policy's to shape: by passes over every function, a
chain of 800 calls took 17 s (round 57); from each callee that grew to its callers, a function fed by 800 others and
called by 800 more took minutes (round 58); in one pass, a chain of n functions still held n**2/2 names, 547 MB for
128 KiB (round 64). Walked backwards from the names the kept code needs, each function is found once in all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class Fillers:
    """The functions whose calls may change each name, from ``own`` (the names each function changes itself) and
    ``calls`` (the functions each calls directly).

    >>> fillers = Fillers({"f": {"A"}, "g": set(), "h": {"B"}}, {"g": ["f"], "h": ["g"]})
    >>> sorted(fillers.of("A")), fillers.of("B")
    (['f', 'g', 'h'], [])
    """

    def __init__(self, own: Mapping[str, Iterable[str]], calls: Mapping[str, Iterable[str]]) -> None:
        self._changers: dict[str, list[str]] = {}
        for function, names in own.items():
            for name in names:
                self._changers.setdefault(name, []).append(function)
        self._callers: dict[str, list[str]] = {}
        for function, callees in calls.items():
            for callee in callees:
                self._callers.setdefault(callee, []).append(function)
        self._found: set[str] = set()

    def of(self, name: str) -> list[str]:
        """The functions a call of which may change ``name``, less those an earlier question found: the caller
        keeps what a function's calls fill once, whichever name it was needed for first."""
        todo = [f for f in self._changers.pop(name, ()) if f not in self._found]
        out: list[str] = []
        while todo:
            function = todo.pop()
            if function in self._found:
                continue
            self._found.add(function)
            out.append(function)
            todo.extend(c for c in self._callers.pop(function, ()) if c not in self._found)
        return out
