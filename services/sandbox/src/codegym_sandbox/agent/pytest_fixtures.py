"""pytest's fixtures that the checker makes for the tests' test functions, where the program's process is
another process: ``capsys``, whose ``readouterr()`` answers what the program printed (to ``sys.stdout`` and
``sys.stderr``) since the fixture began or was last read, as pytest's does in one process.

What the program's process answers is its own output, the program's to say: it decides nothing but what the
tests read as the program's output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

from .test_forms import Fixtures

Output = Callable[[str], tuple[str, str]]  # "capture", "read" or "release" -> what the program printed since


class CaptureResult(NamedTuple):
    out: str
    err: str


class CaptureFixture:
    """What a test gets for ``capsys``."""

    def __init__(self, output: Output) -> None:
        self._output = output

    def readouterr(self) -> CaptureResult:
        return CaptureResult(*self._output("read"))


@contextlib.contextmanager
def _capsys(output: Output) -> Iterator[CaptureFixture]:
    output("capture")
    try:
        yield CaptureFixture(output)
    finally:
        output("release")


def fixtures(output: Output) -> Fixtures:
    """The fixtures a test function of this run may ask for, by name."""
    return {"capsys": lambda: _capsys(output)}
