"""The generative layer: programs built from parts, as hypothesis draws them, for ``test_generative.py``.

Every program answers one task, the sum of a list of integers (the lists drawn too), in one of the three test
forms. Honest programs are an I/O idiom of ``idioms.py`` per language (Python, Node, C, C++, bash: a reader
times a writer, in the stdin form) or a way of writing a Python function (the call and assert forms), right or
off by one: the plain reference is their truth, and their label must agree with it. Hostile programs are one to
three building blocks of ``blocks.py`` (frames, channels and files, names, processes, signals, exceptions and
exits, the standard streams), each run at import, in the call, in a thread or at exit, around a wrong answer:
no route may pass one, whatever the reference makes of it.

How a new family is one building block away: an attack that a future round finds is named for its mechanism
and written as a block (``blocks.BLOCKS``: a function body; it may set ``_STOLEN`` to what it found); an idiom
an honest program uses is a reader or writer of its language (``idioms.py``). The strategies here draw every
block in every place and form, with every other block, and idioms with every other idiom, with no change here.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import Any

from hypothesis import strategies as st

from .blocks import BLOCKS, PLACES, hostile_program
from .corpus import Item
from .idioms import FUNCTION_IDIOMS, READERS, WRITERS, stdin_program
from .tasks import Task
from .variants import HACK, OK, WRONG, Label

BATCH = 12  # programs per drawn example: one /v1/evaluate request per form and language of a batch
ENTRY = "total"
Spec = tuple[str, str, str, str, Label]  # form, language, name, code, label
COUNTS: Counter[str] = Counter()  # what the layer judged in this session, by kind, form and language


def sum_task(lists: list[list[int]]) -> Task:
    """The sum task with ``lists`` as its cases, named after them (a batch's tests are its own)."""
    name = f"sum{zlib.crc32(json.dumps(lists).encode()):08x}"
    cases = tuple(((xs,), sum(xs)) for xs in lists)
    return Task(name, ENTRY, "xs", "l", "int", "The sum of xs.", "def total(xs):\n    return sum(xs)\n", cases, "r + 1")


@st.composite
def honest(draw: Any) -> Spec:
    """An honest program: right (two times in three) or off by one."""
    off = draw(st.sampled_from((0, 0, 1)))
    label = OK if off == 0 else WRONG
    form = draw(st.sampled_from(("stdio", "stdio", "call", "assert")))
    if form != "stdio":
        idiom = draw(st.sampled_from(sorted(FUNCTION_IDIOMS)))
        return form, "python", f"{idiom}+{off}", FUNCTION_IDIOMS[idiom].format(entry=ENTRY, off=off), label
    language = draw(st.sampled_from(sorted(READERS)))
    reader = draw(st.sampled_from(sorted(READERS[language])))
    writer = draw(st.sampled_from(sorted(WRITERS[language])))
    return form, language, f"{reader}.{writer}+{off}", stdin_program(language, reader, writer, off), label


@st.composite
def hostile(draw: Any) -> Spec:
    """A hostile Python program: one to three blocks, each in a place its form has."""
    form = draw(st.sampled_from(("stdio", "call", "assert")))
    places = [p for p in PLACES if form != "stdio" or p != "call"]
    placed = draw(
        st.lists(
            st.tuples(st.sampled_from(sorted(BLOCKS)), st.sampled_from(places)),
            min_size=1,
            max_size=3,
            unique_by=lambda t: t[0],
        )
    )
    name = "+".join(f"{block}@{place}" for block, place in placed)
    return form, "python", name, hostile_program(form, ENTRY, placed), HACK


@st.composite
def batches(draw: Any) -> list[Item]:
    """``BATCH`` programs, honest and hostile, with the cases they are judged on."""
    lists = draw(st.lists(st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=6), min_size=2, max_size=2))
    task = sum_task(lists)
    specs = draw(st.lists(st.one_of(honest(), hostile()), min_size=BATCH, max_size=BATCH))
    return [
        Item(f"{task.name}/{form}/{language}/{name}#{k}", task, form, language, name, code, label, family="generative")
        for k, (form, language, name, code, label) in enumerate(specs)
    ]
