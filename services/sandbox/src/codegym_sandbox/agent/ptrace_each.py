"""System calls made in several traced processes at once (``ptrace_calls.py``): a fork's copies, each made over by
the same calls (``copy_making.py``). Each process is started on its calls first, and only then is each waited
for: they run side by side while the agent waits for the first, instead of one after another.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from .ptrace_calls import Call, Tracee

_T = TypeVar("_T")


def _all_at_once(starts: Sequence[Callable[[], Callable[[], _T]]]) -> list[_T]:
    """Start each (a start gives what finishes it), then finish each: their results. Where one fails, every other
    started is still finished (none is left running the agent's code), and the first failure raised."""
    finishes: list[Callable[[], _T]] = []
    failed: OSError | None = None
    for start in starts:
        try:
            finishes.append(start())
        except OSError as exc:  # it ended (its memory is gone), say
            failed = exc
            break
    got: list[_T] = []
    for finish in finishes:
        try:
            got.append(finish())
        except OSError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return got


def run_each(programs: Sequence[tuple[Tracee, int, int, Sequence[Call], bytes, int]]) -> list[list[int]]:
    """Run a program in each of several processes (each as :meth:`Tracee.run`'s arguments), all at once: the
    results of each."""

    def start(
        tracee: Tracee, code: int, results: int, calls: Sequence[Call], data: bytes, at: int
    ) -> Callable[[], list[int]]:
        return tracee.start(code, results, calls, data, at).finish

    return _all_at_once([functools.partial(start, *program) for program in programs])


def call_each(calls: Sequence[tuple[Tracee, Call]]) -> list[int]:
    """A call in each of several processes (each as :meth:`Tracee.call`'s), all at once: the result of each."""

    def start(tracee: Tracee, name: str, args: Sequence[int]) -> Callable[[], int]:
        tracee.begin_call(name, *args)
        return tracee.end_call

    return _all_at_once([functools.partial(start, tracee, *call) for tracee, call in calls])
