"""Builtins the tests patched, as the program's calls use them: in one process (pytest's), a test that patches
``builtins.input`` (``monkeypatch.setattr("builtins.input", lambda _: "5")``, ``@patch("builtins.input",
side_effect=[...])``), ``sys.stdin`` (``io.StringIO("5\\n")``) or ``builtins.print`` (a mock it reads back) patches
them for the program too. Here the program runs in another process: while a call of the tests' runs there, the
program's ``input``, ``sys.stdin`` and ``print`` ask the checker (a *callback*), which does what the tests' own
would, and answers with plain data.

The program's process asks only in a call, only for what the checker said the tests patched, and only in the
shape of :class:`Callback`; anything else is a ``Breach``. A callback runs what the tests patched in, never
anything the program names, and gives the program what the tests' own process would give it: the input the
tests wrote for it, the value their mock returns.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .checker_wire import Breach, Callback
from .plain_channel import Channel
from .plain_data import decode, encode
from .program_handle import Refs
from .pytest_fixtures import TestsStream

_INPUT, _PRINT = builtins.input, builtins.print  # Python's own, as every process of the agent starts with them
Flags = list[bool]  # what the tests patched: builtins.input, sys.stdin, builtins.print, sys.stdout, sys.stderr
NONE: Flags = [False] * 5
_STREAMS = ("stdin", "stdout", "stderr")
_STREAM_OPS = ("read", "readline", "readlines")
_PRINT_KEYWORDS = frozenset({"sep", "end", "flush"})


# --- in the checker -----------------------------------------------------------------------------------


def streams() -> tuple[object, ...]:
    """The checker's own standard streams, as a run begins: one the tests put in their place is the program's."""
    return tuple(getattr(sys, name) for name in _STREAMS)


def patched(own: tuple[object, ...]) -> Flags:
    """Which of the builtins and streams the tests patched, now (``own``: :func:`streams` as the run began).
    ``capsys``' streams are none: the program's process holds what it prints for them."""
    # Where the tests patched sys.stdin alone, the program's own input() reads it (through its sys.stdin, and
    # writes the prompt to its own sys.stdout, which capsys reads in order).
    swapped = [getattr(sys, name) is not was and not isinstance(getattr(sys, name), TestsStream) for name, was in
               zip(_STREAMS, own, strict=True)]  # fmt: skip
    return [builtins.input is not _INPUT, swapped[0], builtins.print is not _PRINT, swapped[1], swapped[2]]


def serve(
    callback: Callback, flags: Flags, bound: dict[str, Callable[..., Any]], decode_value: Callable[[Any], Any]
) -> list[Any]:
    """The checker's reply to a callback (read as ``checker_wire.Callback``), within ``flags`` and the program's
    names ``bound`` to functions of the tests': what the tests' patch gave, as wire data, or the exception it
    raised, by its nearest builtin type."""
    op, file, name = callback["op"], callback["file"], callback["name"]
    allowed = (op == "input" and flags[0]) or (op in _STREAM_OPS and flags[1]) or (op == "print" and flags[2])
    allowed = allowed or (op == "write" and ((file == "stdout" and flags[3]) or (file == "stderr" and flags[4])))
    allowed = (allowed and not name) or (op == "call" and name in bound)
    if not allowed or file not in ("", "stdout", "stderr") or (file and op not in ("print", "write")):
        raise Breach(f"the program's process asked for what the tests did not patch: {op!r} {name[:64]!r}")
    keywords = callback["kwargs"]
    if op != "call" and not keywords.keys() <= (_PRINT_KEYWORDS if op == "print" else frozenset()):
        raise Breach(f"the program's process passed {op} what it does not take: {sorted(keywords)!r}")
    try:
        args = [decode_value(a) for a in callback["args"]]
        kwargs = {key: decode_value(value) for key, value in keywords.items()}
        if op == "call":
            value: Any = bound[name](*args, **kwargs)
        elif op == "input":
            value = builtins.input(*args)
        elif op == "print":
            if file:
                kwargs["file"] = sys.stdout if file == "stdout" else sys.stderr
            builtins.print(*args, **kwargs)
            value = None  # what a mock of it returns is no plain data, and no program reads it
        elif op == "write":
            value = getattr(sys, file).write(*args)
        else:
            value = getattr(sys.stdin, op)(*args)
        return ["callback", encode(value, None)]
    except Breach:
        raise
    except BaseException as exc:  # the tests' mock that ran out (StopIteration), an EOFError: the program's
        if not isinstance(exc, (Exception, KeyboardInterrupt)):
            raise  # the tests' own end (pytest.fail() in their patch): never the program's to catch
        kind = next(k for k in type(exc).__mro__ if k.__module__ == "builtins")
        name = kind.__name__ if issubclass(kind, (Exception, KeyboardInterrupt)) else "RuntimeError"
        return ["raise", name, _message(exc)]


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[: 1 << 16]
    except BaseException:
        return ""


# --- in the program's process -------------------------------------------------------------------------


class _Caller:
    def __init__(self, channel: Channel, refs: Refs) -> None:
        self.channel, self.refs = channel, refs

    def ask(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], file: str = "", name: str = "") -> Any:
        sent = [encode(a, self.refs) for a in args]
        keywords = {str(key): encode(value, self.refs) for key, value in kwargs.items()}
        self.channel.answer({"callback": {"op": op, "name": name, "args": sent, "kwargs": keywords, "file": file}})
        reply = self.channel.request()
        if reply[0] == "callback":
            return decode(reply[1], self.refs)
        kind = getattr(builtins, str(reply[1]), None)
        if not (isinstance(kind, type) and issubclass(kind, (Exception, KeyboardInterrupt))):
            kind = RuntimeError  # a mock's KeyboardInterrupt reaches the program as itself (a loop's end)
        raise kind(str(reply[2]))

    def input(self, *args: Any) -> Any:
        return self.ask("input", args, {})

    def print(self, *args: Any, file: Any = None, **kwargs: Any) -> None:
        if file is not None and file is not sys.stdout and file is not sys.stderr:
            _PRINT(*args, file=file, **kwargs)  # to a file of the program's own: not the tests' business
            return
        where = "" if file is None else "stdout" if file is sys.stdout else "stderr"
        self.ask("print", args, {k: v for k, v in kwargs.items() if k in _PRINT_KEYWORDS}, where)


class _Stdin(io.TextIOBase):
    """The program's ``sys.stdin`` while the tests' patched one is what it reads."""

    def __init__(self, caller: _Caller) -> None:
        super().__init__()
        self._caller = caller

    def readable(self) -> bool:
        return True

    def read(self, *args: Any) -> Any:
        return self._caller.ask("read", args, {})

    def readline(self, *args: Any) -> Any:
        return self._caller.ask("readline", args, {})

    def readlines(self, *args: Any) -> Any:
        return self._caller.ask("readlines", args, {})


class _Out(io.TextIOBase):
    """The program's ``sys.stdout`` or ``sys.stderr`` while the tests' own is where it writes
    (``patch("sys.stdout", new_callable=StringIO)``, ``contextlib.redirect_stdout``)."""

    def __init__(self, caller: _Caller, which: str) -> None:
        super().__init__()
        self._caller, self._which = caller, which

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> Any:
        return self._caller.ask("write", (text,), {}, self._which)


@contextlib.contextmanager
def forwarding(channel: Channel, refs: Refs, flags: object) -> Iterator[None]:
    """In the program's process, for one call: the builtins the tests patched (``flags``) ask the checker."""
    if not isinstance(flags, list) or flags == NONE or len(flags) != len(NONE):
        yield
        return
    caller = _Caller(channel, refs)
    saved = builtins.input, builtins.print, sys.stdin, sys.stdout, sys.stderr
    if flags[0]:
        builtins.input = caller.input
    if flags[1]:
        sys.stdin = _Stdin(caller)
    if flags[2]:
        builtins.print = caller.print
    if flags[3]:
        sys.stdout = _Out(caller, "stdout")
    if flags[4]:
        sys.stderr = _Out(caller, "stderr")
    try:
        yield
    finally:
        builtins.input, builtins.print, sys.stdin, sys.stdout, sys.stderr = saved


class Stubs:
    """In the program's process: its names the tests bound to functions of theirs (``mock.patch("solution.f")``,
    ``monkeypatch.setattr(solution, "f", fake)``), each a stub that calls the tests' function in the checker, as the
    program's other functions would call it in one process; and what each name held before, until put back."""

    _MISSING = object()

    def __init__(self, channel: Channel, refs: Refs) -> None:
        self.caller = _Caller(channel, refs)
        self.saved: dict[str, Any] = {}

    def rebind(self, scope: dict[str, Any], what: str, name: str) -> None:
        if what == "restore":
            if name in self.saved:
                was = self.saved.pop(name)
                if was is self._MISSING:
                    scope.pop(name, None)
                else:
                    scope[name] = was
            return
        self.saved.setdefault(name, scope.get(name, self._MISSING))
        caller = self.caller

        def stub(*args: Any, **kwargs: Any) -> Any:
            return caller.ask("call", args, kwargs, name=name)

        stub.__name__ = stub.__qualname__ = name
        scope[name] = stub
