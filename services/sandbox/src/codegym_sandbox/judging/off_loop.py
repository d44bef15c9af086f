"""Comparing large outputs off the event loop.

A stdin test compared by whitespace or as numbers splits both outputs and looks at every token in Python: 8 MiB
of output took 0.3 s by whitespace and 4 s as numbers (``1.0`` against ``1.00``), from runs that cost their
worker 60 ms. On the event loop that time was every client's: another client's ``/livez`` waited seconds, and a
request of 200 such programs held the server for minutes. So a comparison past :data:`ON_LOOP_CHARS` is made in
a small pool of processes of its own (:func:`pool`), where it takes the loop only the time to send the output
(the expected output goes to each process once per test: :func:`_match`); an exact comparison, or outputs
equal as strings, are decided on the loop at the speed of a copy. So is whether a large expected output can
be printed at all (:func:`least_output`), which looks at each of its tokens too.

An output waiting for its comparison is no longer its run's, whose share of the memory budget ended with it: it
takes a share of its own (:meth:`Comparisons.outputs_match`), so that outputs waiting for the pool hold the next
runs back, as runs in flight do, rather than piling up beside them.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ..backends.base import MemoryShare
from ..models import Comparison
from .compare import least_output as least_output_here
from .compare import outputs_match

# The most characters (output and expected together) compared on the loop: about a thousand tokens as numbers,
# a millisecond or two; beyond it, in the pool, whose round trip costs a fraction of that.
ON_LOOP_CHARS = 4096
# What a comparison in the pool holds on the server, a multiple of its output's characters: the output the run
# sent, its text, and the copy sent to the pool.
HELD_PER_CHAR = 3
# Expected outputs each process of the pool keeps, by test: a request's next program sends its output only.
_HELD = 4

_pool: ProcessPoolExecutor | None = None
_serials = itertools.count()


def pool() -> ProcessPoolExecutor:
    """The processes comparisons are made in: a quarter of the CPUs (at least one, at most four), started when
    the first large comparison comes."""
    global _pool
    if _pool is None:
        size = max(1, min(4, (os.cpu_count() or 1) // 4))
        _pool = ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn"))
    return _pool


def shutdown() -> None:
    """End the pool's processes (at the server's stop); a later comparison starts it again."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


class Comparisons:
    """One request's comparisons of its stdin tests' outputs, charged to ``memory`` (the runs' budget)."""

    def __init__(self, memory: MemoryShare) -> None:
        self.memory = memory
        self.serial = next(_serials)  # with a test's id, names its expected output in the pool's processes

    async def outputs_match(
        self, actual: str, expected: str, mode: Comparison, rel_tol: float, abs_tol: float, test: object
    ) -> bool:
        """``compare.outputs_match``, made off the loop when it is large; ``test`` names ``expected``."""
        if mode is Comparison.EXACT or actual == expected or len(actual) + len(expected) <= ON_LOOP_CHARS:
            return outputs_match(actual, expected, mode, rel_tol, abs_tol)
        held_mb = min(-(-HELD_PER_CHAR * len(actual) // (1 << 20)), self.memory.total_mb)
        lease = await self.memory.acquire(held_mb)
        try:
            key = (self.serial, id(test))
            same = await _in_pool(actual, key, None, mode, rel_tol, abs_tol)
            if same is None:  # the process that took it had not been sent this test's expected output
                same = await _in_pool(actual, key, expected, mode, rel_tol, abs_tol)
            assert same is not None
            return same
        finally:
            self.memory.release(lease)


async def least_output(expected: str, mode: Comparison) -> int:
    """``compare.least_output``, made off the loop when it is large: it looks at every token of ``expected`` (10 MB
    of numbers took the loop 0.6 s, for each test of a request)."""
    if mode is Comparison.EXACT or len(expected) <= ON_LOOP_CHARS:
        return least_output_here(expected, mode)
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(pool(), least_output_here, expected, mode)
    except BrokenProcessPool:  # as in _in_pool: a fresh pool, once
        shutdown()
        return await loop.run_in_executor(pool(), least_output_here, expected, mode)


async def _in_pool(
    actual: str, key: tuple[int, int], expected: str | None, mode: Comparison, rel_tol: float, abs_tol: float
) -> bool | None:
    loop = asyncio.get_running_loop()
    for attempt in range(2):
        try:
            return await loop.run_in_executor(pool(), _match, actual, key, expected, mode, rel_tol, abs_tol)
        except BrokenProcessPool:  # a process of it died (killed from outside): a fresh pool, once
            shutdown()
            if attempt:
                raise
    raise AssertionError("unreachable")


_held: OrderedDict[tuple[int, int], str] = OrderedDict()  # in a process of the pool: see _HELD


def _match(
    actual: str, key: tuple[int, int], expected: str | None, mode: Comparison, rel_tol: float, abs_tol: float
) -> bool | None:
    """In a process of the pool: the comparison, or None where ``expected`` is needed and not held here."""
    if expected is None:
        expected = _held.get(key)
        if expected is None:
            return None
        _held.move_to_end(key)
    else:
        _held[key] = expected
        while len(_held) > _HELD:
            _held.popitem(last=False)
    return outputs_match(actual, expected, mode, rel_tol, abs_tol)
