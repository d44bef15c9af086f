"""Comparing two outputs, or measuring an expected output, a slice at a time.

A comparison by whitespace or as numbers is token by token, so it can be made in slices of bounded size with
what is left carried from one slice to the next: the comparison pool (``off_loop``) makes one slice a turn, so
that a client's comparison waits for a slice of another's, never for the whole of it (8 MiB of ``1`` against
``1.0`` was 5 s of a process, chosen by the program that printed it). The verdict is the rule's of
:func:`compare.outputs_match`, decided here token by token with :func:`compare.tokens_match`: a slice ends on
whitespace (a token cut by its end is left for the next), and the two outputs' tokens are paired in order, so
the pairs compared are those of the whole outputs, and the counts differ exactly when one ends with tokens of
the other left.

A slice is characters of each output from where the last one ended: :class:`Slicer` keeps those places and
sizes, :func:`compare_slice` compares one (in a process of the pool), :func:`compare_sliced` makes a whole
comparison of them in one place (the rule's tests); :class:`Measurer`, :func:`measure_slice` and
:func:`least_sliced` are the same for ``least_output``, a sum over an expected output's tokens. A token longer
than a slice makes its side's slices grow until it fits: a long token costs a process what its characters do,
never a Python step a character.
"""

from __future__ import annotations

from typing import NamedTuple

from ..models import Comparison
from .compare import least_tokens, tokens_match

# Characters of each output a slice holds: a process takes ~10-20 ms over one at the slowest tokens this
# machine measured (numbers read as decimals, ~350 ns a character; ``1`` against ``1.0``, ~250 ns); by
# whitespace, or to measure an expected output (``least_output``: ~65 ns a character), a larger one.
NUMBER_SLICE = 1 << 15
TEXT_SLICE = 1 << 18


def slice_chars(mode: Comparison) -> int:
    """Characters of each output a slice of a comparison under ``mode`` holds."""
    return NUMBER_SLICE if mode is Comparison.FLOAT else TEXT_SLICE


class Part(NamedTuple):
    """One slice of a text: its characters, and whether they run to the text's end."""

    text: str
    ends: bool


class Cut(NamedTuple):
    """What a slice of a comparison decided: the verdict (None: the next slice decides), the characters of each
    output it is done with, and for each output whether its slice held no whole token (the next must be longer)."""

    verdict: bool | None
    actual_used: int
    expected_used: int
    actual_short: bool
    expected_short: bool


class Measure(NamedTuple):
    """What a slice of an expected output added to ``least_output``: its tokens' least bytes, their count, the
    characters it is done with, and whether it held no whole token."""

    least: int
    tokens: int
    used: int
    short: bool


def _whole(part: Part) -> tuple[list[str], int]:
    """The whole tokens of ``part``, and the characters of the token its end cuts (0 where none is cut): a slice
    that does not end the text and ends in no whitespace may have cut its last token."""
    tokens = part.text.split()
    if part.ends or not part.text or part.text[-1].isspace():
        return tokens, 0
    return tokens, len(tokens.pop())


def _used(part: Part, tokens: list[str], cut: int, paired: int) -> int:
    """The characters of ``part`` done with once ``paired`` of its whole ``tokens`` are: up to the end of the last
    paired token (all but the cut token where every whole one is paired)."""
    if paired == len(tokens):
        return len(part.text) - cut
    if not paired:
        return 0
    left = len(tokens) - paired + (1 if cut else 0)
    return len(part.text.rsplit(None, left)[0])


def compare_slice(actual: Part, expected: Part, mode: Comparison, rel_tol: float, abs_tol: float) -> Cut:
    """One slice of a comparison, in a process of the pool: the whole tokens of both slices paired as far as the
    shorter goes. False at the first pair that differs, or where one output has ended with tokens of the other
    left; True where both ended with every token paired."""
    got, got_cut = _whole(actual)
    want, want_cut = _whole(expected)
    paired = min(len(got), len(want))
    if not tokens_match(got[:paired], want[:paired], mode, rel_tol, abs_tol):
        return Cut(False, 0, 0, False, False)
    got_more, want_more = len(got) > paired or got_cut > 0, len(want) > paired or want_cut > 0
    if (actual.ends and not got_more and want_more) or (expected.ends and not want_more and got_more):
        return Cut(False, 0, 0, False, False)
    if actual.ends and expected.ends:  # neither has more: a token cut is never at a text's end
        return Cut(True, 0, 0, False, False)
    return Cut(
        None,
        _used(actual, got, got_cut, paired),
        _used(expected, want, want_cut, paired),
        not got and got_cut == len(actual.text) and not actual.ends,
        not want and want_cut == len(expected.text) and not expected.ends,
    )


def measure_slice(expected: Part, mode: Comparison) -> Measure:
    """One slice of ``least_output``, in a process of the pool: its whole tokens' least bytes."""
    tokens, cut = _whole(expected)
    short = not tokens and cut == len(expected.text) and not expected.ends
    return Measure(least_tokens(tokens, mode), len(tokens), len(expected.text) - cut, short)


class Slicer:
    """Where a comparison of ``actual`` with ``expected`` is, slice after slice: :meth:`next` is the slices to
    compare, :meth:`advance` moves past what a :class:`Cut` is done with."""

    def __init__(self, actual: str, expected: str, size: int) -> None:
        self.texts = (actual, expected)
        self.at = [0, 0]
        self.size = size
        self.sizes = [size, size]

    def next(self) -> tuple[Part, Part]:
        return self._part(0), self._part(1)

    def _part(self, side: int) -> Part:
        text, at, size = self.texts[side], self.at[side], self.sizes[side]
        return Part(text[at : at + size], at + size >= len(text))

    def advance(self, cut: Cut) -> None:
        used = (cut.actual_used, cut.expected_used)
        self.at = [self.at[0] + used[0], self.at[1] + used[1]]
        most = max(used)
        for side, short in enumerate((cut.actual_short, cut.expected_short)):
            if short:  # one token longer than its slice: twice the slice, until it fits or reaches the end
                self.sizes[side] *= 2
            elif most:  # a slice of each with about as many tokens: the denser output's slice is shorter
                self.sizes[side] = max(self.size * used[side] // most, self.size // 64, 1)

    @property
    def cost(self) -> int:
        """The characters of the next slices: what a turn at the pool is charged for them."""
        return sum(min(size, len(text) - at) for text, at, size in zip(self.texts, self.at, self.sizes, strict=True))


def compare_sliced(actual: str, expected: str, mode: Comparison, rel_tol: float, abs_tol: float, size: int) -> bool:
    """:func:`compare.outputs_match` for ``whitespace`` and ``float``, made in slices of ``size`` characters."""
    slicer = Slicer(actual, expected, size)
    while True:
        cut = compare_slice(*slicer.next(), mode, rel_tol, abs_tol)
        if cut.verdict is not None:
            return cut.verdict
        slicer.advance(cut)


class Measurer:
    """Where ``least_output`` of ``expected`` is, slice after slice: :meth:`next` is the slice to measure,
    :meth:`advance` adds what it measured, and is the whole measure once the slice measured ran to the end."""

    def __init__(self, expected: str, size: int) -> None:
        self.text, self.size = expected, size
        self.at = self.least = self.tokens = 0
        self.grown = size

    def next(self) -> Part:
        return Part(self.text[self.at : self.at + self.grown], self.at + self.grown >= len(self.text))

    def advance(self, part: Part, measure: Measure) -> int | None:
        self.least, self.tokens, self.at = (
            self.least + measure.least,
            self.tokens + measure.tokens,
            self.at + measure.used,
        )
        if part.ends:
            return self.least + max(self.tokens - 1, 0)  # a space between each two
        self.grown = self.grown * 2 if measure.short else self.size
        return None


def least_sliced(expected: str, mode: Comparison, size: int) -> int:
    """:func:`compare.least_output` for ``whitespace`` and ``float``, measured in slices of ``size`` characters."""
    measurer = Measurer(expected, size)
    while True:
        part = measurer.next()
        if (least := measurer.advance(part, measure_slice(part, mode))) is not None:
            return least
