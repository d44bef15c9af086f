"""Run a Python script inside an already-running interpreter, as ``python script.py`` would.

The box forks a warm agent process and calls :func:`run_script` in the child, so a Python run pays for a
fork, not for an interpreter start-up. What a fresh interpreter would do is repeated here: a new
``__main__``, ``sys.argv``, ``sys.path[0]``, standard streams on fds 0-2 (with the interpreter's own encoding
and error handlers), the whole recursion limit for the program's own frames, the traceback and exit code of an
uncaught exception, joining non-daemon threads, ``atexit`` handlers, the final flush and the collection of what
the program left in reference cycles.
"""

from __future__ import annotations

import atexit
import builtins
import gc
import io
import operator
import os
import re
import signal
import sys
import types
import warnings

from . import program_bytes

Streams = tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]


def _chosen(stream: object, errors: str) -> tuple[str, str]:
    # What the interpreter chose for this stream at its start-up, under the environment every run inherits
    # (under ``LANG=C.UTF-8``, UTF-8 with ``surrogateescape`` for stdin and stdout; ``strict`` under another
    # UTF-8 locale): read from the agent's own streams, so that no rule of the interpreter's is listed again.
    return getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or errors


# Read as this module is imported, before any run replaces the agent's streams.
_STDIN, _STDOUT, _STDERR = (
    _chosen(sys.__stdin__, "strict"),
    _chosen(sys.__stdout__, "strict"),
    _chosen(sys.__stderr__, "backslashreplace"),
)


def make_streams() -> Streams:
    """Standard streams on fds 0-2, as the interpreter makes them at start-up (no I/O happens here).

    Made and installed ahead of time in a series' process, so that a test's process does not pay for the
    codec lookups, the buffers and freeing the streams they replace: they must be made while fds 0-2 are
    pipes, as a run's are. Nothing may use them before the test's process does.
    """
    return (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=_STDIN[0], errors=_STDIN[1]),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=_STDOUT[0], errors=_STDOUT[1]),
        io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding=_STDERR[0],
            errors=_STDERR[1],
            line_buffering=True,
        ),
    )


def install_streams(streams: Streams) -> None:
    """Make ``streams`` the standard streams (the ones they replace are freed here, which costs a run)."""
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


_get_limit, _set_limit = sys.getrecursionlimit, sys.setrecursionlimit
_below = [0]  # how many of the runner's frames lie below the program's: the limit it sees leaves them out


def _getrecursionlimit() -> int:
    return _get_limit() - _below[0]


def _setrecursionlimit(limit: int, /) -> None:
    n = operator.index(limit)
    # A limit under 1 is the interpreter's error to raise; one near a C int's largest still fits with ours.
    _set_limit(min(n + _below[0], (1 << 31) - 1) if n > 0 else n)


def enter() -> None:
    """What the runner does last before its caller starts the program's first frame, in the program's own
    process (which it never returns from).

    The runner's objects are frozen, so that what is left to the collector, and so to :func:`finish`'s flush,
    is the program's alone (a buffered file of the agent's, flushed again in a fork, would write twice). And the
    program has the whole recursion limit for its own frames, as ``python3 main.py`` has it: the depth of the
    runner's calls below (the box's loop, the fork, this call) is added to the limit, and left out of what
    ``sys.getrecursionlimit`` shows and ``sys.setrecursionlimit`` takes.
    """
    gc.freeze()
    limit = _getrecursionlimit()
    try:
        _set_limit(1)  # refused, with the depth the interpreter counts (calls from C count too, not only frames)
        below = 0
    except RecursionError as exc:
        depth = re.search(r"depth (\d+)", str(exc))
        below = int(depth.group(1)) - 1 if depth else 0  # this frame stands for the program's first one
    _below[0] = below
    _setrecursionlimit(limit)
    for name, wrapper in (("getrecursionlimit", _getrecursionlimit), ("setrecursionlimit", _setrecursionlimit)):
        wrapper.__name__ = wrapper.__qualname__ = name
        wrapper.__module__ = "sys"
        setattr(sys, name, wrapper)


def exit_code(exc: SystemExit) -> int:
    """The exit status the interpreter gives an uncaught ``exc`` (CPython's ``_Py_HandleSystemExit``): None is 0;
    any int, a bool too (``sys.exit(not ok)``), is its value as a C long (one past it is -1), as the kernel keeps
    it (its low byte), read without running the program's methods (an int subclass's ``__and__``); anything else
    is written to stderr, and 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        value = int.__index__(code)
        return (value if -(1 << 63) <= value < 1 << 63 else -1) & 0xFF
    try:
        print(code, file=sys.stderr if sys.stderr is not None else sys.__stderr__)
    except BaseException:  # the interpreter drops an error of the message's
        pass
    return 1


def finish(code: int, main: types.ModuleType | None = None) -> int:
    """What the interpreter does at exit, as far as a program can see it: join non-daemon threads, run the
    ``atexit`` handlers, flush the streams, then clear ``main`` (the ``__main__`` module), so that the
    ``__del__`` of what its globals held runs, collect the garbage, so that what sat in a reference cycle (a
    class, a function that names itself) is freed too and a file it held writes out its buffer, and flush
    again: the current streams and the original ones, which a program that rebound ``sys.stdout`` after
    printing (to ``sys.stderr``, a ``StringIO``, ``None``) still holds text in. The exit code, 120 when stdout
    cannot be flushed."""
    threading = sys.modules.get("threading")  # a program that never imported it started no threads with it
    if threading is not None:
        try:
            threading._shutdown()  # what the interpreter does before atexit
        except BaseException:
            pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    code = _flush(code)
    if main is not None:
        try:
            main.__dict__.clear()
        except BaseException:
            pass
    _flush_files()
    try:
        gc.collect()
    except BaseException:
        pass
    code = _flush(code)
    for stream in (sys.__stdout__, sys.__stderr__):
        # The interpreter frees these last, and a failure to flush them then changes no exit code.
        _flush_one(stream)
    return code


def _flush_files() -> None:
    """Flush every file object the program made that is still open, text before binary, as the interpreter's
    exit does by freeing them all. Left to the collector, the files in a reference cycle (a class attribute)
    are finalized in no set order: the raw file first closes its descriptor and the text is lost. The runner's
    own objects were frozen (see :func:`enter`), and are not among those listed; the standard streams are
    flushed in their turn."""
    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    standard = [sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__]
    try:
        files = [f for f in gc.get_objects() if isinstance(f, kinds) and not any(f is s for s in standard)]
    except BaseException:  # a program that filled its memory: as it was before
        return
    files.sort(key=lambda f: not isinstance(f, io.TextIOWrapper))
    for f in files:
        _flush_one(f)


def _flush(code: int) -> int:
    for stream in (sys.stdout, sys.stderr):
        if not _flush_one(stream):
            code = code or 120  # the interpreter's exit code when flushing stdout fails
    return code


def _flush_one(stream: object) -> bool:
    """Flush ``stream`` as the interpreter does at exit: None, or a stream already closed, is left alone.
    Whether it did not fail."""
    try:
        if stream is None or getattr(stream, "closed", False):
            return True
        stream.flush()  # type: ignore[attr-defined]
    except BaseException:
        return False
    return True


def load(path: str, source: bytes | None = None) -> tuple[types.CodeType | None, bool]:
    """Compile ``path`` (whose contents are ``source``, when given) ahead of its runs: the code, or None where
    the runs must compile it themselves; and whether the source does not compile at all.

    None when compiling fails or warns: a run then compiles it again, and its standard error shows the
    error or warning exactly as ``python script.py`` would. Only a syntax error (``ValueError``: a NUL byte,
    in the Pythons that say so) is a source that does not compile: a compile that runs out of recursion or
    memory is the run's to show.
    """
    try:
        if source is None:
            with open(path, "rb") as f:
                source = f.read()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            code = program_bytes.compile_program(source, path)
    except (SyntaxError, ValueError):
        return None, True
    except Exception:
        return None, False
    return (None if caught else code), False


def run_script(path: str, argv: list[str], code: types.CodeType | None = None, streams_made: bool = False) -> int:
    """Execute ``path`` (or its ``code``, compiled by :func:`load`) as the main module; return the exit code.

    ``argv``: the command line after the interpreter (``["main.py", ...]``), which becomes ``sys.argv``, as
    ``python3 main.py ...`` makes it. An uncaught ``KeyboardInterrupt`` ends the process by ``SIGINT``, as
    the interpreter does. With ``streams_made``, the standard streams were made for this run already (see
    :func:`make_streams`).
    """
    if not streams_made:
        install_streams(make_streams())
    main = new_main(path)
    sys.argv = list(argv) or [path]
    sys.path[0:0] = [os.path.dirname(path)]
    enter()
    interrupted = False
    try:
        if code is None:
            with open(path, "rb") as f:
                code = program_bytes.compile_program(f.read(), path)
        exec(code, main.__dict__)
        status = 0
    except SystemExit as exc:
        status = exit_code(exc)
    except BaseException:
        kind, error, tb = sys.exc_info()
        # Leave the sandbox's frames out (this one's, a compile's), so the traceback reads as the interpreter's would.
        tb = program_frames(tb)
        if error is not None:
            error.__traceback__ = tb
        sys.excepthook(kind, error, tb)  # type: ignore[arg-type]
        status = 1
        interrupted = isinstance(error, KeyboardInterrupt)
        del kind, error, tb  # its frames hold the program's objects: they go with __main__ (see finish)
    status = finish(status, main)
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


def program_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` from its first frame that is not the sandbox's: a run's (:func:`run_script`'s, a compile's in
    ``program_bytes``), above the program's own first frame."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES):
        tb = tb.tb_next
    return tb


_OWN_FILES = os.path.join(os.path.dirname(__file__), "")


def new_main(path: str, name: str = "__main__") -> types.ModuleType:
    """A fresh main module for the script at ``path``, in ``sys.modules`` as ``__main__``.

    ``name``: its ``__name__`` (under which it is in ``sys.modules`` too, so that what looks a class's
    module up there, ``pickle`` or ``dataclasses``, finds it). Another name than ``__main__`` runs a script
    as a module that is imported: its ``if __name__ == "__main__":`` block does not run.
    """
    main = types.ModuleType(name)
    main.__dict__.update({"__file__": path, "__builtins__": builtins, "__cached__": None})
    sys.modules["__main__"] = sys.modules[name] = main
    return main


_WARM_UP = r"""
import sys, os, io, re, math, json, collections, itertools, functools, heapq, bisect, string
data = sys.stdin.read() if False else "3\n1 2 3\n"
n, *xs = map(int, data.split())
print(sum(xs), f"{n:>4}", sorted(xs, key=lambda v: -v), end="\n", file=io.StringIO())
try:
    raise ValueError("warm")
except ValueError:
    pass
"""


def warm_up() -> None:
    """Do once, before any fork, what every run would otherwise do first: the first compile() of a
    process initialises the parser, and the first traceback loads its modules (about 3 ms a run). The
    assert tests' runner is loaded by the box, which imports it (importing it here made a cycle: the
    runner's program process runs programs with this module)."""
    import traceback

    exec(compile(_WARM_UP, "<warm-up>", "exec"), {"__name__": "__warm__"})
    try:
        compile("x = (", "<warm-up>", "exec")
    except SyntaxError:
        traceback.format_exc()
