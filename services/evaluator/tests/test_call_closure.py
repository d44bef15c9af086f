"""What each function reaches through its calls: the fixed point of passes over every function, in one pass."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

from codegym_evaluator.call_closure import closed


def fixed_point(own: Mapping[str, set[str]], calls: Mapping[str, set[str]]) -> dict[str, frozenset[str]]:
    """The plain rule: grow every function's set by its callees' until none grows."""
    reached = {name: set(names) for name, names in own.items()}
    grew = True
    while grew:
        grew = False
        for name, callees in calls.items():
            for callee in callees:
                if not reached[callee] <= reached[name]:
                    reached[name] |= reached[callee]
                    grew = True
    return {name: frozenset(names) for name, names in reached.items()}


def test_it_is_the_fixed_point_on_graphs_with_cycles() -> None:
    rng = random.Random(58)
    for _ in range(300):
        names = [f"f{i}" for i in range(rng.randint(1, 12))]
        own = {name: {f"D{rng.randint(0, 5)}"} if rng.random() < 0.5 else set() for name in names}
        calls = {name: {rng.choice(names) for _ in range(rng.randint(0, 3))} - {name} for name in names}
        assert closed(own, calls) == fixed_point(own, calls), (own, calls)


class Counted(Mapping[str, set[str]]):
    """A call graph that counts how often a function's callees are asked for."""

    def __init__(self, calls: dict[str, set[str]]) -> None:
        self.calls, self.asked = calls, 0

    def __getitem__(self, name: str) -> set[str]:
        self.asked += 1
        return self.calls[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)


def test_each_function_is_read_a_bounded_number_of_times() -> None:
    """Round 58: grown from each callee that grew to all its callers, one function fed by n others and called by n
    more cost some n**3 (a 95 KB completion held the server's analysis pool 30 s; 256 KB, minutes)."""
    n = 400
    own = {f"h{i}": {f"D{i}"} for i in range(n)} | {"g": set()} | {f"c{j}": set() for j in range(n)}
    calls = Counted({"g": {f"h{i}" for i in range(n)}} | {f"c{j}": {"g"} for j in range(n)})
    reached = closed(own, calls)
    assert all(reached[f"c{j}"] == frozenset(f"D{i}" for i in range(n)) for j in range(n))
    assert calls.asked <= 2 * len(own), calls.asked
