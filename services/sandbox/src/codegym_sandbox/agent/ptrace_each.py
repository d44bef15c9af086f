"""System calls made in several traced processes at once (``ptrace_calls.py``): a fork's copies, each made over by
the same calls (``copy_making.py``). Each process is started on its calls first, and only then is each waited
for: they run side by side while the agent waits for the first, instead of one after another.
"""

from __future__ import annotations

from collections.abc import Sequence

from .ptrace_calls import Call, Running, Tracee


def run_each(programs: Sequence[tuple[Tracee, int, int, Sequence[Call], bytes, int]]) -> list[list[int]]:
    """Run a program in each of several processes (each as :meth:`Tracee.run`'s arguments), all at once: the
    results of each. Where one fails, every other is still waited for (none is left running the agent's code)."""
    started: list[Running] = []
    failed: OSError | None = None
    for tracee, code, results, calls, data, at in programs:
        try:
            started.append(tracee.start(code, results, calls, data, at))
        except OSError as exc:  # it ended (its memory is gone), say
            failed = failed or exc
            break
    got: list[list[int]] = []
    for running in started:
        try:
            got.append(running.finish())
        except OSError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return got


def call_each(calls: Sequence[tuple[Tracee, Call]]) -> list[int]:
    """A call in each of several processes (each as :meth:`Tracee.call`'s), all at once: the result of each.
    Where one fails, every other is still waited for."""
    begun: list[Tracee] = []
    failed: OSError | None = None
    for tracee, (name, args) in calls:
        try:
            tracee.begin_call(name, *args)
            begun.append(tracee)
        except OSError as exc:
            failed = failed or exc
            break
    got: list[int] = []
    for tracee in begun:
        try:
            got.append(tracee.end_call())
        except OSError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return got
