"""The kernel of a notebook run or a session (``cells.py`` is its supervisor): one ``__main__`` in which each
cell runs, as a notebook runs it.

:func:`serve` reads each cell from the supervisor (a :func:`message` on its requests pipe), runs it
(:func:`run_cell`: the statements, then the value of the last one when it is an expression), with the cell's
stdin where it has one, and answers on its socket: the value's repr and the error, never the output, which
goes to the supervisor through the kernel's stdout and stderr. A cell's time limit interrupts it
(:class:`CellTimeout`, its error); the kernel goes on with the next cell.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import linecache
import os
import signal
import socket
import sys
import traceback
import types
from typing import Any, NoReturn, cast

from .cell_frames import CellError, KernelRequest, within

_CHUNK = 1 << 16


def run_cell(source: str, scope: dict[str, Any], filename: str) -> Any:
    """Run ``source`` in ``scope`` as a notebook runs a cell: every statement, then the value of the last one
    when it is an expression (returned; None when there is none)."""
    # Its lines, for tracebacks, as a notebook shows them (a name no file of the program can have).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tree = ast.parse(source, filename)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        tree.body.pop()
    # dont_inherit: this module's __future__ imports are not the cell's.
    exec(compile(tree, filename, "exec", dont_inherit=True), scope)
    if not isinstance(last, ast.Expr):
        return None
    return eval(compile(ast.Expression(last.value), filename, "eval", dont_inherit=True), scope)


class CellTimeout(TimeoutError):
    """The cell ran longer than the job's cell timeout."""


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def message(data: Any) -> bytes:
    body = json.dumps(data).encode()  # ASCII: a lone surrogate travels as its escape
    return b"%d\n" % len(body) + body


def take(buffer: bytes) -> tuple[Any, bytes] | None:
    """The first whole message of ``buffer`` and what follows it, or None while it is incomplete."""
    head, newline, rest = buffer.partition(b"\n")
    if not newline:
        if len(head) > 20:
            raise ValueError("not a message")
        return None
    size = int(head)
    if len(rest) < size:
        return None
    return json.loads(rest[:size]), rest[size:]


def _text(value: object) -> str:
    try:
        return str(value)
    except BaseException:
        return "<unprintable>"


def error_of(exc: BaseException) -> CellError:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # this module's frames: the traceback reads as the cell's own
    try:
        lines = traceback.format_exception(type(exc), exc, tb)
    except BaseException:
        lines = []
    return {"ename": type(exc).__name__, "evalue": _text(exc), "traceback": [_text(line) for line in lines]}


def reseed() -> None:
    """Random state of this process's own, from the system's randomness: for ``random`` and, where it was imported,
    numpy's global generator (a fork's copies, and a run's fork of its judge, would otherwise draw what their parent
    would: numpy, unlike ``random``, does not seed again in a fork)."""
    for name, call in (("random", "seed"), ("numpy.random", "seed")):
        module = sys.modules.get(name)
        try:
            getattr(module, call)()
        except BaseException:
            pass  # not imported, or replaced by a cell: its state stays the cells' business


def serve(requests: int, answers: socket.socket) -> NoReturn:
    """Run the cells the supervisor sends, one at a time, and answer each; end when it hangs up."""
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), "utf-8", "backslashreplace")
    err = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), "utf-8", "backslashreplace")
    stdin = sys.stdin
    sys.stdout = sys.__stdout__ = out  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = err  # type: ignore[misc]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main

    cell_timeout, ran = 0.0, 0

    in_cell = False

    def on_alarm(signum: int, frame: object) -> None:
        if in_cell:  # one that comes after its cell (a thread of the cell's took it, unblocked) is dropped
            raise CellTimeout(f"the cell ran longer than its cell_timeout ({cell_timeout:g} s)")

    # A session's agent interrupts a cell with SIGALRM too (see ``session.py``), where the kernel keeps no
    # timer of its own (``timer`` false): one handler, one error, whoever rings. It is blocked between cells, and
    # one that came too late for its cell is dropped before the next, which it must not interrupt.
    alarm = {signal.SIGALRM}
    signal.signal(signal.SIGALRM, on_alarm)
    signal.pthread_sigmask(signal.SIG_BLOCK, alarm)
    buffer = b""
    while True:
        try:
            taken = take(buffer)
            while taken is None:
                part = os.read(requests, _CHUNK)
                if not part:
                    os._exit(0)  # every cell ran
                buffer += part
                taken = take(buffer)
            request: KernelRequest = taken[0]  # the supervisor's: trusted to be what it says
            buffer = taken[1]
            cell_timeout = float(request["cell_timeout"])
            sys.stdin = io.StringIO(request["stdin"]) if request["stdin"] is not None else stdin
            if cast("dict[str, object]", request).pop("reseed", False):  # a fork's copy's first cell
                reseed()
            display: list[dict[str, str]] = []
            error: list[CellError] = []
            try:
                try:
                    while signal.sigtimedwait(alarm, 0) is not None:
                        pass
                    in_cell = True
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, alarm)
                    if cell_timeout > 0 and request["timer"]:
                        signal.setitimer(signal.ITIMER_REAL, cell_timeout)
                    ran += 1  # a session's cells are numbered through its life, a notebook's from its first
                    value = run_cell(request["source"] or "", main.__dict__, f"<cell {ran}>")
                    if value is not None:
                        display.append({"text/plain": repr(value)})
                finally:
                    # An interruption that rings up to here is this cell's (the handler runs here at the latest).
                    signal.pthread_sigmask(signal.SIG_BLOCK, alarm)
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    in_cell = False
            except BaseException as exc:  # a cell's error is its result, as in a notebook
                error.append(error_of(exc))
            sys.stdout, sys.stderr = out, err
            for stream in (out, err):
                try:
                    stream.flush()
                except BaseException:
                    pass
            answer = within(display, error, int(request["answer_bytes"]))
            answers.sendall(message({**request, "source": None, "stdin": None, **answer}))
        except BaseException:
            os._exit(1)  # the supervisor sees the kernel end
