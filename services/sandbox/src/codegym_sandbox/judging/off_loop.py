"""Comparing large outputs off the event loop.

A stdin test compared by whitespace or as numbers splits both outputs and looks at every token in Python: 8 MiB
of output took 0.3 s by whitespace and 4 s as numbers (``1.0`` against ``1.00``), from runs that cost their
worker 60 ms. On the event loop that time was every client's: another client's ``/livez`` waited seconds, and a
request of 200 such programs held the server for minutes. So a comparison past :data:`ON_LOOP_CHARS` is made in
a small pool of processes of its own (:func:`pool`), where it takes the loop only the time to send the outputs,
a slice of each at a time (``slices``); an exact comparison, or outputs equal as strings, are decided on the
loop at the speed of a copy. So is whether a large expected output can be printed at all
(:func:`least_output`), which looks at each of its tokens too.

The pool's time is its clients' as the workers' is, and is shared the same way. Comparisons enter the pool in
their clients' turns (``pool_turns``), never as they came: one client's backlog of a hundred outputs made every
other client's comparisons wait behind it, seconds for each of its outputs. A turn is a slice of a comparison,
not the whole of it (:func:`_in_pool`): a slice is bounded (some 10-20 ms of a process), and a comparison's
whole cost is the program's to choose (8 MiB of ``1`` against ``1.0``, 5 s of a process, waited for by every
other client's comparison, whatever its turn). And a comparison takes a place of
its client's run window (``WorkerPool.admit``), as its run did, for as long as it waits and is made: a
program's coroutine waiting for its comparison held no place, so one request had an output waiting for every
program whose run had ended. An output waiting for its comparison is no longer its run's, whose share of the
memory budget ended with it: it takes a share of its own (:meth:`Comparisons.outputs_match`), inside that place
and in its client's turn at the budget, so that what a client's outputs hold of the budget is bounded with its
runs, not queued ahead of the next clients' runs; and a client's oldest comparison goes first at the pool
(``pool_turns``), so that its shares come back one after another, not all at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar, cast

from ..agent.own_status import status_kb
from ..backends.base import MemoryShare, RunPolicy
from ..models import Comparison
from ..pytest_file import TooCostly
from .compare import least_output as least_output_here
from .compare import outputs_match
from .pool_turns import Turns
from .slices import TEXT_SLICE, Measurer, Slicer, compare_slice, measure_slice, slice_chars

__all__ = ["Comparisons", "TooCostly", "analysed", "least_output", "shutdown"]

T = TypeVar("T")

# The most characters (output and expected together) compared on the loop: about a thousand tokens as numbers,
# a millisecond or two; beyond it, in the pool, whose round trip costs a fraction of that.
ON_LOOP_CHARS = 4096
# What a comparison in the pool holds on the server, a multiple of its output's characters: the output the run
# sent, its text, and the slice sent to the pool.
HELD_PER_CHAR = 3
# What parsing a text a request sent holds in a process of the pool, a multiple of its characters (a MiB of dense
# statements, parsed, walked and compiled, took 0.6 GB: round 57), and what it costs a client's clock there
# against a character compared (a MiB took 4-7 s, a MiB of numbers compared some 0.5).
PARSED_PER_CHAR = 640
PARSE_COST = 10
# What one analysis may take of its process: CPU seconds (a 256 KiB pytest file splits in about one here), and at
# least this much memory; a process that holds more than ``RECYCLE_KB`` after one is ended, a fresh one started
# for the next (what a call took is freed, but the allocator keeps it: 5.6 GB after 64 ``/submit`` calls of
# large prompts, each cached, outside the budget: round 58).
ANALYSIS_CPU_S = 5
ANALYSIS_FLOOR_MB = 64
RECYCLE_KB = 256 << 10

_serials = itertools.count()

_WATCH_S = 1.0  # how often a process of the pool looks whether its server is still there


def size() -> int:
    """The pool's processes: a quarter of the CPUs, at least one, at most four."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


class _Pool:
    """A pool of processes, started when first asked for, and its clients' turns, one place a process (for the
    running event loop: a server has one). Each place has a process of its own while it is held (an executor of
    one worker: :meth:`executor`), so that a process that dies (ended past an analysis's bound, or killed from
    outside) fails its own call alone: in one executor of all of them, its death broke every call in flight, and
    another client's right program was judged on the failure of a call it never made. Each process ends with the
    server (:func:`_end_with`)."""

    def __init__(self, spare: bool = False) -> None:
        self._spare = spare  # a spare place for each place (``Turns``), for a client that holds none
        self._idle: list[ProcessPoolExecutor] = []
        self._made: set[ProcessPoolExecutor] = set()
        self._turns: tuple[asyncio.AbstractEventLoop, Turns] | None = None

    @property
    def started(self) -> bool:
        """Whether any of its processes is there (idle or at work)."""
        return bool(self._made)

    def executor(self) -> ProcessPoolExecutor:
        """A process for a place: an idle one, or a new one (started with its first call)."""
        if self._idle:
            return self._idle.pop()
        context = multiprocessing.get_context("spawn")
        made = ProcessPoolExecutor(1, mp_context=context, initializer=_end_with, initargs=(os.getpid(),))
        self._made.add(made)
        return made

    def done_with(self, executor: Executor, keep: bool) -> None:
        """A place gives its process back: idle for the next place (``keep``), else ended (it died, or it holds
        what its calls left). An executor this pool did not make (a test's) is left as it is."""
        if not isinstance(executor, ProcessPoolExecutor) or executor not in self._made:
            return
        if keep:
            self._idle.append(executor)
        else:
            self._made.discard(executor)
            executor.shutdown(wait=False, cancel_futures=True)

    def turns(self) -> Turns:
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns[0] is not loop:
            self._turns = (loop, Turns(size(), size() if self._spare else 0))
        return self._turns[1]

    def end(self) -> None:
        """End its processes, where they were started; later work starts them again."""
        for executor in self._made:
            executor.shutdown(wait=False, cancel_futures=True)
        self._made.clear()
        self._idle.clear()


_comparing = _Pool()
# Work on a request's text (``analysed``) has a pool and turns of its own: a parse is one call of a second or two,
# never sliced, and in the comparisons' pool each slice of another client's comparison waited for one (a 0.1 s
# comparison took 18 s beside a client's 256 KiB pytest files: round 57).
_analysing = _Pool(spare=True)


def pool() -> Executor:
    """A process for a place at the comparisons' pool (its processes start with the first large comparison)."""
    return _comparing.executor()


def analysis_pool() -> Executor:
    """A process for a place at the pool a request's text is worked on in (:func:`analysed`)."""
    return _analysing.executor()


def turns() -> Turns:
    """The clients' turns at :func:`pool`."""
    return _comparing.turns()


def analysis_turns() -> Turns:
    """The clients' turns at :func:`analysis_pool`."""
    return _analysing.turns()


def _end_with(server: int) -> None:
    """In a process of the pool: end once ``server`` is gone. Each holds both ends of the executor's queue (a
    pickled queue carries both), so none reads an end of it when the server dies: every process of the pools of
    servers killed outright stayed on the host, 38 MB each, for good (round 56)."""

    # A process ended past its CPU time (``_bounded``: SIGXCPU) writes no core file: the server's disk is no
    # request's to fill, one core of the pool's memory at a time.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(_WATCH_S)
        os._exit(0)

    threading.Thread(target=watch, name="server-watch", daemon=True).start()


def shutdown() -> None:
    """End the pools' processes (at the server's stop); later work starts them again."""
    _comparing.end()
    _analysing.end()


class Comparisons:
    """One request's comparisons of its stdin tests' outputs, charged to ``memory`` (the runs' budget), made in
    the window and the turn of the client of ``policy`` (the request's: a request of no client is one alone)."""

    def __init__(self, memory: MemoryShare, policy: RunPolicy | None = None) -> None:
        self.memory = memory
        self.window = policy.window if policy else None
        self.client = policy.client if policy and policy.client else f"#{next(_serials)}"

    async def outputs_match(self, actual: str, expected: str, mode: Comparison, rel_tol: float, abs_tol: float) -> bool:
        """``compare.outputs_match``, made off the loop when it is large."""
        if mode is Comparison.EXACT or actual == expected or len(actual) + len(expected) <= ON_LOOP_CHARS:
            return outputs_match(actual, expected, mode, rel_tol, abs_tol)
        held_mb = min(-(-HELD_PER_CHAR * len(actual) // (1 << 20)), self.memory.total_mb)
        async with self.window or contextlib.nullcontext():
            # In its client's turn at the budget, as the client's runs: taken as the server's own (first of all
            # that wait), one client's comparisons held every other client's runs out of it (round 56).
            lease = await self.memory.acquire(held_mb, client=self.client)
            try:
                return await _in_pool(self.client, actual, expected, mode, rel_tol, abs_tol)
            finally:
                self.memory.release(lease)


async def analysed(
    memory: MemoryShare,
    client: str,
    fn: Callable[[str], T],
    text: str,
    held_mb: int | None = None,
    chars: int | None = None,
    *,
    linear: bool = True,
) -> T:
    """``fn(text)``, work on a text a request sent (a pytest file split: ``executor.Analyse``; a completion's
    code extracted, ``/submit``'s; a provided row's task), off the loop where ``text`` is large, or where ``fn``'s
    cost is not bounded by its length (not ``linear``: a compile, whose 20 nested ``finally`` blocks are each
    compiled twice, 2**20 copies of a 1 KB file, 15 s and 3 GB; a compressed pickle decoded: round 58): in a
    process of :func:`analysis_pool`, in ``client``'s turn, and charged to ``memory``, in its turn at the budget
    once it has its place there, ``held_mb``, by default what a syntax tree of ``text`` holds. Such work is one
    call, never sliced, so the kernel bounds it (:func:`_bounded`): :data:`ANALYSIS_CPU_S` of the process's CPU,
    and the memory it is charged; past either, :class:`TooCostly`. ``chars``: what it reads, where ``fn`` holds
    more than ``text``."""
    size = len(text) if chars is None else chars
    if size <= ON_LOOP_CHARS and linear:
        return fn(text)
    client = client or f"#{next(_serials)}"
    held = max(-(-PARSED_PER_CHAR * size // (1 << 20)) if held_mb is None else held_mb, ANALYSIS_FLOOR_MB)
    held = min(held, memory.total_mb)
    async with _place(client, PARSE_COST * size, next(_serials), analysis_turns()) as place:
        # Charged once it is in the pool, never while it waits for its place: a client's requests waiting there
        # held the whole budget, and every other client's runs waited for it (round 58).
        lease = await memory.acquire(held, client=client)
        try:
            done, value, kept_kb = await place.call(_bounded, fn, text, held, ANALYSIS_CPU_S, analysis=True)
        except BrokenProcessPool:  # its process was ended past its CPU time (or killed): this call's alone
            done, value, kept_kb = False, None, 0
        finally:
            memory.release(lease)
        if kept_kb > RECYCLE_KB:
            place.retire()  # what the call left (freed, but kept by the allocator) goes with its process
    if not done:
        raise TooCostly(f"more than {ANALYSIS_CPU_S} s of CPU or {held} MiB of memory")
    return cast(T, value)


def _bounded(fn: Callable[[str], T], text: str, held_mb: int, cpu_s: float) -> tuple[bool, T | None, int]:
    """In a process of the analysis pool: ``fn(text)`` within ``cpu_s`` more of the process's CPU
    time (``RLIMIT_CPU``: past it, the kernel ends the process) and ``held_mb`` more of its address space
    (``RLIMIT_AS``: past it, ``MemoryError``); whether it was done, its value, and what the process holds after
    it, in kB. Soft limits alone, set back after the call: a hard one would be the process's for good."""
    if multiprocessing.parent_process() is None:  # a pool of threads (a test's): the server's own limits are not its
        return True, fn(text), 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    saved = {name: resource.getrlimit(name) for name in (resource.RLIMIT_CPU, resource.RLIMIT_AS)}
    done, value = False, None
    try:
        _soft(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + cpu_s))
        _soft(resource.RLIMIT_AS, status_kb("VmSize:") * 1024 + (held_mb << 20))
        try:
            done, value = True, fn(text)
        except MemoryError:
            done, value = False, None
    finally:
        for name, limit in saved.items():
            resource.setrlimit(name, limit)
    return done, value, status_kb("RssAnon:")


def _soft(name: int, value: int) -> None:
    """Set the soft limit ``name`` to ``value``, within its hard one."""
    _, hard = resource.getrlimit(name)
    resource.setrlimit(name, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


async def least_output(expected: str, mode: Comparison, client: str) -> int:
    """``compare.least_output``, made off the loop when it is large, a slice a turn of ``client``'s: it looks at
    every token of ``expected`` (10 MB of numbers took the loop 0.6 s, for each test of a request). A request's
    are made before it is admitted, one test after another."""
    if mode is Comparison.EXACT or len(expected) <= ON_LOOP_CHARS:
        return least_output_here(expected, mode)
    measurer = Measurer(expected, TEXT_SLICE)
    places, rank = turns(), next(_serials)
    with places.staying(client):
        while True:
            part = measurer.next()
            async with _place(client, len(part.text), rank) as place:
                measure = await place.call(measure_slice, part, mode)
            if (least := measurer.advance(part, measure)) is not None:
                return least


async def _in_pool(client: str, actual: str, expected: str, mode: Comparison, rel_tol: float, abs_tol: float) -> bool:
    """The comparison in the pool, a slice a turn of ``client``'s (``slices``): another client's comparison waits
    for the slice in a process, never for the whole of this one."""
    slicer = Slicer(actual, expected, slice_chars(mode))
    places, rank = turns(), next(_serials)  # the client's older comparisons' slices go first (pool_turns)
    with places.staying(client):
        while True:
            async with _place(client, slicer.cost, rank) as place:
                cut = await place.call(compare_slice, *slicer.next(), mode, rel_tol, abs_tol)
            if cut.verdict is not None:
                return cut.verdict
            slicer.advance(cut)


class _Place:
    """A place of ``client``'s at the pool (:func:`_place`), and its process. What is sent there goes one call
    after another, and the place, with its process, is given back once its holder has left it and its last call
    is done: a wait cancelled (its client went away) leaves that call computing there, in the place."""

    def __init__(self, client: str, places: Turns, loop: asyncio.AbstractEventLoop) -> None:
        self.client, self._places, self._loop = client, places, loop
        self._computing = 0
        self._left = self._given = False
        self._executor: tuple[_Pool, Executor] | None = None
        self._keep = True

    async def call(self, fn: Callable[..., T], *args: Any, analysis: bool = False) -> T:
        """``fn(*args)`` in the place's process, of :func:`analysis_pool` where ``analysis``. Where the process
        died as it ran, a comparison is made again in a fresh one, once (a process killed from outside); an analysis
        is not (it was ended past its bound, its own: ``BrokenProcessPool`` is its caller's to say). One that died
        idle, before the call, is replaced for any call."""
        owner = _analysing if analysis else _comparing
        tries = 1 if analysis else 2
        while True:
            if self._executor is None:
                self._executor = (owner, analysis_pool() if analysis else pool())
            try:
                future: Future[T] = self._executor[1].submit(fn, *args)
            except BrokenProcessPool:  # it died idle, before this call (killed from outside): a fresh one
                owner.done_with(self._executor[1], keep=False)
                self._executor = None
                continue
            self._computing += 1
            future.add_done_callback(self._done)
            try:
                return await asyncio.wrap_future(future)
            except BrokenProcessPool:
                owner.done_with(self._executor[1], keep=False)
                self._executor = None
                tries -= 1
                if not tries:
                    raise

    def retire(self) -> None:
        """End the place's process once the place is given back, rather than keeping it for the next place."""
        self._keep = False

    def leave(self) -> None:
        self._left = True
        self._give()

    def _done(self, _: Future[Any]) -> None:  # in the executor's thread, or on the loop where it was done already
        with contextlib.suppress(RuntimeError):  # the loop has closed (the server stopped) with it in the pool
            self._loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        self._computing -= 1
        self._give()

    def _give(self) -> None:
        if self._left and not self._computing and not self._given:
            self._given = True
            if self._executor is not None:
                owner, executor = self._executor
                owner.done_with(executor, keep=self._keep)
            self._places.give(self.client)


@contextlib.asynccontextmanager
async def _place(client: str, cost: int, rank: int, places: Turns | None = None) -> AsyncIterator[_Place]:
    """A place at the pool, in ``client``'s turn (``places``: :func:`turns` by default), for the call of one slice
    of ``cost`` characters of the client's work of ``rank`` (its age)."""
    places = places or turns()
    await places.take(client, cost, rank)
    place = _Place(client, places, asyncio.get_running_loop())
    try:
        yield place
    finally:
        place.leave()
