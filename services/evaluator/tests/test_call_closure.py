"""Which functions' calls may change a name: the reverse of the fixed point of what each function reaches."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator, Mapping

from codegym_evaluator.call_closure import Fillers


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


def test_each_name_gets_the_functions_that_reach_it_once_in_all() -> None:
    rng = random.Random(64)
    for _ in range(300):
        names = [f"f{i}" for i in range(rng.randint(1, 12))]
        own = {name: {f"D{rng.randint(0, 5)}"} if rng.random() < 0.5 else set() for name in names}
        calls = {name: {rng.choice(names) for _ in range(rng.randint(0, 3))} - {name} for name in names}
        reached = fixed_point(own, calls)
        for data in (f"D{i}" for i in range(6)):  # each asked alone: exactly the functions that reach it
            assert set(Fillers(own, calls).of(data)) == {f for f, r in reached.items() if data in r}, (own, calls)
        fillers, answered = Fillers(own, calls), []
        for data in (f"D{i}" for i in rng.sample(range(6), 6)):  # asked in turn: each function once
            answered += fillers.of(data)
        assert sorted(answered) == sorted({f for f, r in reached.items() if r}), (own, calls)


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
    fillers = Fillers(own, calls)
    assert sorted(fillers.of("D0")) == sorted(["h0", "g", *(f"c{j}" for j in range(n))])
    assert all(fillers.of(f"D{i}") == [f"h{i}"] for i in range(1, n))
    assert calls.asked <= 2 * len(own), calls.asked


def test_a_chain_of_calls_holds_a_name_a_function() -> None:
    """Round 64: a chain of n functions, each changing a name of its own and calling the next, held each one's
    set of every name it reaches, n**2/2 names (547 MB for a completion of 128 KiB)."""
    n = 20_000
    own = {f"f{i}": {f"D{i}"} for i in range(n)}
    calls = {f"f{i}": {f"f{i + 1}"} for i in range(n - 1)}
    tracemalloc.start()
    try:
        fillers = Fillers(own, calls)
        assert len(fillers.of(f"D{n - 1}")) == n
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
