"""pytest's own fixtures that the checker makes for the tests' test functions, where the program's process is
another process:

- ``capsys`` (and ``capfd``, the same here), whose ``readouterr()`` answers what the program printed (to
  ``sys.stdout`` and ``sys.stderr``) and what the tests printed themselves, in the order they printed it, since
  the fixture began or was last read, as pytest's does in one process;
- ``tmp_path`` (and ``tmpdir``): a new directory in the run's scratch directory, where the program can read what
  the tests write;
- ``monkeypatch``: pytest's own, undone after the test (``setattr(solution, "LIMIT", 3)`` binds the program's
  name, as the tests' own ``solution.LIMIT = 3`` does; see ``program_module``).

What the program's process answers is its own output, the program's to say: it decides nothing but what the
tests read as the program's output.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from .fixture_requests import Builtin

if TYPE_CHECKING:
    import pathlib

Output = Callable[[str], tuple[str, str]]  # "capture", "read" or "release" -> what the program printed since


class CaptureResult(NamedTuple):
    out: str
    err: str


class CaptureFixture:
    """What a test gets for ``capsys``: the program's output and the tests' own, in the order they came (the
    program prints only while the tests call it, so what it printed before each of the tests' writes is read
    first)."""

    def __init__(self, output: Output) -> None:
        self._output = output
        self._parts: dict[str, list[str]] = {"out": [], "err": []}

    def readouterr(self) -> CaptureResult:
        self._pull()
        out, err = ("".join(self._parts[key]) for key in ("out", "err"))
        for parts in self._parts.values():
            parts.clear()
        return CaptureResult(out, err)

    def write(self, key: str, text: str) -> None:
        self._pull()
        self._parts[key].append(text)

    def _pull(self) -> None:
        out, err = self._output("read")
        self._parts["out"].append(out)
        self._parts["err"].append(err)


class TestsStream(io.TextIOBase):
    """The checker's ``sys.stdout`` or ``sys.stderr`` while ``capsys`` holds them."""

    def __init__(self, fixture: CaptureFixture, key: str) -> None:
        super().__init__()
        self._fixture, self._key = fixture, key

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._fixture.write(self._key, text)
        return len(text)


@contextlib.contextmanager
def _capsys(output: Output) -> Iterator[CaptureFixture]:
    output("capture")
    fixture = CaptureFixture(output)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TestsStream(fixture, "out"), TestsStream(fixture, "err")
    try:
        yield fixture
    finally:
        sys.stdout, sys.stderr = saved
        output("release")


@contextlib.contextmanager
def _tmp_path() -> Iterator[pathlib.Path]:
    # Imported here, in the checker alone: programs are forked from the process that imports this module.
    import pathlib
    import tempfile

    # Where the program's process can reach it: the run's scratch directory, which goes with the run.
    yield pathlib.Path(tempfile.mkdtemp(prefix="pytest-", dir=os.getcwd()))


class TempPathFactory:
    """What a test gets for ``tmp_path_factory``: new directories in the run's directory, as ``tmp_path`` is."""

    def mktemp(self, basename: str, numbered: bool = True) -> pathlib.Path:
        import pathlib
        import tempfile

        return pathlib.Path(tempfile.mkdtemp(prefix=f"{basename}-", dir=os.getcwd()))

    def getbasetemp(self) -> pathlib.Path:
        import pathlib

        return pathlib.Path(os.getcwd())


@contextlib.contextmanager
def _tmp_path_factory() -> Iterator[TempPathFactory]:
    yield TempPathFactory()


def _pytests(module: str, name: str) -> Any:
    """pytest's own ``module.name``, imported by name (the agent imports nothing but the standard library, and this
    only where the tests ask for one of pytest's fixtures): the tests' error where the runtime has no pytest."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise TypeError(f"{module}.{name} is pytest's, and this runtime's pytest has none") from None


@contextlib.contextmanager
def _tmpdir() -> Iterator[object]:
    local_path = _pytests("_pytest._py.path", "LocalPath")
    with _tmp_path() as path:
        yield local_path(str(path))


@contextlib.contextmanager
def _monkeypatch() -> Iterator[object]:
    patch = _pytests("_pytest.monkeypatch", "MonkeyPatch")()
    try:
        yield patch
    finally:
        patch.undo()


def fixtures(output: Output) -> Builtin:
    """pytest's fixtures a test function of this run may ask for, by name."""
    return {
        "capsys": lambda: _capsys(output),
        "capfd": lambda: _capsys(output),
        "tmp_path": _tmp_path,
        "tmp_path_factory": _tmp_path_factory,
        "tmpdir": _tmpdir,
        "monkeypatch": _monkeypatch,
    }
