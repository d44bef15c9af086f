"""What each function of a program reaches through the functions it calls: a set of each, grown along the call
graph to its fixed point in one pass, callees before their callers, each cycle of calls once.

Sanitising asks what a function changes, directly or through what it calls (``sanitize``). Grown by passes over
every function until none grew, a chain of 800 calls took 17 s (round 57); grown from each callee that grew to its
callers, a function fed by 800 others and called by 800 more took minutes (round 58): a completion is the policy's
to shape, and the server sanitises completions for ``/submit``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def closed(own: Mapping[str, set[str]], calls: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """For each function of ``own``, its set together with the sets of every function it calls (``calls``: the
    functions of ``own`` each calls directly), directly or not. The functions of a cycle share one set.

    >>> sorted(closed({"f": {"a"}, "g": {"b"}, "h": set()}, {"f": ["g"], "g": ["f"], "h": ["g"]})["h"])
    ['a', 'b']
    """
    out: dict[str, frozenset[str]] = {}
    for cycle in _cycles(own, calls):
        members = set(cycle)
        reached = set().union(*(own[name] for name in cycle))
        reached = reached.union(
            *(out[callee] for name in cycle for callee in calls.get(name, ()) if callee not in members)
        )
        frozen = frozenset(reached)
        for name in cycle:
            out[name] = frozen
    return out


def _cycles(nodes: Iterable[str], calls: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of the call graph (Tarjan's, with a stack of its own, never Python's:
    a chain of calls is as long as the program makes it), each after every one it calls into."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(calls.get(root, ())))]
        while work:
            node, callees = work[-1]
            for callee in callees:
                if callee not in index:
                    index[callee] = low[callee] = len(index)
                    stack.append(callee)
                    on_stack.add(callee)
                    work.append((callee, iter(calls.get(callee, ()))))
                    break
                if callee in on_stack:
                    low[node] = min(low[node], index[callee])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    cycle = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        cycle.append(member)
                        if member == node:
                            break
                    found.append(cycle)
    return found
