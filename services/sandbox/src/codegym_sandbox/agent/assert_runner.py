"""Runs a program against assert tests so that nothing the program does can produce a pass.

The main script of every assert-test run is two lines that call :func:`main` (see ``harness.ASSERT_RUNNER``):
this module is part of the agent, loaded by the box before it forks, so a run compiles nothing of it. A run
reads, on stdin, the program's length, the program, then the tests.

Two processes, so that the pass signal never depends on anything the program can reach:

* the **checker** (this process) makes itself non-dumpable (no other process of its uid may read its
  memory or descriptors) and forks the program's process, which reads the program from stdin and gives
  stdin up; only then does the checker read the tests.
  It runs the tests with every name they take from the program (``candidate``, helpers such as
  HumanEval's ``poly``, constants) replaced by a stand-in that asks the program's process;
* the **program's process** gets ``/dev/null`` as stdin before the program runs (the tests are still in
  the pipe, for the checker alone), runs the program as ``__main__``, then answers calls: arguments and
  return values cross as plain data (None, bool, int, float, complex, str, bytes, and lists, tuples,
  dicts, sets of them; anything else stays in the program's process and is a handle that only equals
  itself). A value's own ``__eq__`` never runs in the checker, so an object that equals everything is a
  wrong answer, and the tests' expected values never reach the program.

The verdict is the checker's exit status, which the program cannot set: 0 when the tests ran to their end,
:data:`WRONG_ANSWER` when an assertion failed or the program ended before the tests did, and otherwise
what the program's own failure was (its exit code, or its signal, which the checker passes on to itself
so that a CPU limit still reads as one).
"""

from __future__ import annotations

import builtins
import ctypes
import importlib
import json
import os
import signal
import sys
import traceback
import types
from typing import Any

WRONG_ANSWER = 87  # the checks ran and an assertion failed, or the program ended before they did
_UNCATCHABLE = (SystemExit, KeyboardInterrupt, GeneratorExit)


# --- plain data on the wire ---------------------------------------------------------------------------
# JSON, with lists tagged by their first element: ["l", ...] a list, ["t", ...] a tuple and so on. Only
# exact types are read back; a subclass crosses as its base type, without its methods.


class Handle:
    """A value that stayed in the program's process, and can be passed back to it.

    It never equals plain data. Two handles are compared by the program (both sides are its own objects,
    such as instances of a class it defines).
    """

    def __init__(self, ref: int, text: str, checker: Any = None, callable_: bool = False) -> None:
        self._ref, self._text, self._checker, self._callable = ref, text, checker, callable_

    def __repr__(self) -> str:
        return self._text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Handle):
            return False
        return other._ref == self._ref or (self._checker is not None and self._checker.same(self._ref, other._ref))

    def __hash__(self) -> int:
        return hash(("handle", self._ref))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._callable or self._checker is None:
            raise TypeError(f"{self._text} is not callable")
        return self._checker.call(["ref", self._ref], args, kwargs)

    # What tests do with an object of the program's (``Solution().twoSum(...)``, ``len(tree)``, ``obj.val``):
    # done by the program's process on its own object; only the plain data (or a handle) comes back.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_checker") is None:
            raise AttributeError(name)  # protocols the interpreter probes (copy, pickle): not the program's
        return self._checker.operate("getattr", self._ref, name)

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key)

    def __len__(self) -> int:
        return int(self._ask("len"))

    def __iter__(self) -> Any:
        return iter(self._ask("iter"))

    def __contains__(self, item: Any) -> bool:
        return self._ask("contains", item) is True

    def __bool__(self) -> bool:
        return self._ask("bool") is True

    def _ask(self, op: str, *args: Any) -> Any:
        if self._checker is None:
            raise TypeError(f"{self._text} does not support {op}")
        return self._checker.operate(op, self._ref, *args)


def encode(value: Any, refs: list[Any] | None) -> Any:
    """Plain data for ``value``; with ``refs`` (the program's side) what is not plain becomes a handle."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        number = int(value)
        return number if -(1 << 53) < number < 1 << 53 else ["i", hex(number)]
    if isinstance(value, float):
        return ["f", float(value).hex()]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return ["y" if isinstance(value, bytes) else "ya", bytes(value).hex()]
    if isinstance(value, complex):
        return ["c", value.real.hex(), value.imag.hex()]
    if isinstance(value, list):
        return ["l", *(encode(v, refs) for v in list(value))]
    if isinstance(value, tuple):
        return ["t", *(encode(v, refs) for v in tuple(value))]
    if isinstance(value, dict):
        return ["d", *([encode(k, refs), encode(v, refs)] for k, v in dict(value).items())]
    if isinstance(value, frozenset):
        return ["fs", *(encode(v, refs) for v in frozenset(value))]
    if isinstance(value, set):
        return ["s", *(encode(v, refs) for v in set(value))]
    if isinstance(value, range):
        return ["r", value.start, value.stop, value.step]
    if isinstance(value, Handle):
        return ["h", value._ref, value._text, False]
    if refs is None:
        raise TypeError(f"only plain data can be passed to the program, not {type(value).__name__}")
    if isinstance(value, (types.GeneratorType, map, filter, zip, reversed, enumerate)):
        return ["g", *(encode(v, refs) for v in value)]  # an iterator crosses as what it yields
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), refs) if getattr(value, "ndim", 1) == 0 else ["np", encode(value.tolist(), refs)]
    refs.append(value)
    return ["h", len(refs) - 1, _repr(value), callable(value)]


def _repr(value: Any) -> str:
    try:
        return str(repr(value))[:200]
    except BaseException:
        return f"<{type(value).__name__}>"


def decode(data: Any, refs: list[Any] | None = None, checker: Any = None) -> Any:
    """The value ``data`` stands for; handles resolve through ``refs`` on the program's side."""
    if not isinstance(data, list):
        return data
    tag, rest = data[0], data[1:]
    if tag == "l":
        return [decode(v, refs, checker) for v in rest]
    if tag == "t":
        return tuple(decode(v, refs, checker) for v in rest)
    if tag == "d":
        return {decode(k, refs, checker): decode(v, refs, checker) for k, v in rest}
    if tag == "s":
        return {decode(v, refs, checker) for v in rest}
    if tag == "fs":
        return frozenset(decode(v, refs, checker) for v in rest)
    if tag == "i":
        return int(rest[0], 16)
    if tag == "f":
        return float.fromhex(rest[0])
    if tag == "c":
        return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
    if tag in ("y", "ya"):
        raw = bytes.fromhex(rest[0])
        return raw if tag == "y" else bytearray(raw)
    if tag == "r":
        return range(*rest)
    if tag == "g":
        return iter([decode(v, refs, checker) for v in rest])
    if tag == "np":
        values = decode(rest[0], refs, checker)
        numpy = sys.modules.get("numpy")
        return numpy.array(values) if numpy is not None else values
    if tag == "h":
        if refs is not None:
            return refs[rest[0]]
        return Handle(rest[0], rest[1], checker, bool(rest[2]))
    raise ValueError(f"unknown tag {tag!r}")


# --- the channel between the two processes: one JSON document a line --------------------------------


class Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader = os.fdopen(read_fd, "rb")
        self.write_fd = write_fd

    def send(self, message: Any) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        while data:
            data = data[os.write(self.write_fd, data) :]

    def receive(self) -> Any:
        line = self.reader.readline()
        if not line:
            raise EOFError
        return json.loads(line)


_libc = ctypes.CDLL(None)  # opened when the box loads this module, not in every run


def _set_dumpable(on: bool) -> None:
    _libc.prctl(4, int(on), 0, 0, 0)  # PR_SET_DUMPABLE


# --- the program's process ----------------------------------------------------------------------------


def _finish(code: int) -> None:
    """End the program's process as the interpreter would: threads joined, atexit run, streams flushed."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int) and not isinstance(exc.code, bool):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _program(channel: Channel) -> None:
    """In the program's process: run the program, then answer the checker until it hangs up."""
    source = _read_program()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the tests are still in the stdin pipe: they are the checker's alone
    os.close(null)
    channel.send(["ready"])
    _set_dumpable(True)
    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": sys.argv[0], "__builtins__": builtins, "__cached__": None})
    sys.modules["__main__"] = main
    scope = main.__dict__
    try:
        exec(compile(source, "<program>", "exec"), scope)
    except SystemExit as exc:
        _finish(_exit_code(exc))
    except BaseException:
        kind, error, tb = sys.exc_info()
        sys.excepthook(kind, error, tb.tb_next if tb is not None else None)  # type: ignore[arg-type]
        _finish(1)
    refs: list[Any] = []
    while True:
        try:
            request = channel.receive()
        except (EOFError, ValueError):
            _finish(0)
        try:
            if request[0] == "names":
                reply: Any = ["ok", {n: _describe(scope[n], refs) for n in request[1] if n in scope}]
            elif request[0] == "same":
                reply = ["ok", bool(refs[request[1]] == refs[request[2]])]
            elif request[0] == "op":
                value = _operate(refs[request[2]], request[1], [decode(a, refs) for a in request[3:]])
                reply = ["ok", encode(value, refs)]
            else:
                reply = _call(request, scope, refs)
        except SystemExit as exc:  # the program exits in the middle of the tests: the checker sees it end
            _finish(_exit_code(exc))
        except BaseException as exc:
            reply = _error(exc)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        try:
            channel.send(reply)
        except BaseException as exc:  # a value that cannot be written (a huge int, a cycle): an error
            channel.send(_error(exc))


def _operate(value: Any, op: str, args: list[Any]) -> Any:
    """One of the operations a :class:`Handle` passes on, on the program's own object."""
    if op == "getattr":
        return getattr(value, str(args[0]))
    if op == "getitem":
        return value[args[0]]
    if op == "len":
        return len(value)
    if op == "iter":
        return list(value)
    if op == "contains":
        return bool(args[0] in value)
    if op == "bool":
        return bool(value)
    raise TypeError(f"unknown operation {op!r}")


def _describe(value: Any, refs: list[Any]) -> Any:
    if isinstance(value, types.ModuleType):
        return ["module", str(value.__name__)]  # the checker imports its own copy (``import os`` above the tests)
    if callable(value) and not isinstance(value, type):
        return ["fn"]
    return ["value", encode(value, refs)]


def _call(request: list[Any], scope: dict[str, Any], refs: list[Any]) -> list[Any]:
    _, target, args_data, kwargs_data = request
    function = scope[target[1]] if target[0] == "name" else refs[target[1]]
    args = [decode(a, refs) for a in args_data]
    kwargs = {k: decode(v, refs) for k, v in kwargs_data.items()}
    result = function(*args, **kwargs)
    # Arguments the program may have changed in place go back too, as a caller would see them.
    after = {i: encode(a, refs) for i, a in enumerate(args) if isinstance(a, (list, dict, set, bytearray))}
    return ["ok", encode(result, refs), after]


def _error(exc: BaseException) -> list[Any]:
    kind = type(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _error.__code__.co_filename:
        tb = tb.tb_next  # this file's frames: the traceback reads as the program's own
    text = "".join(traceback.format_exception(kind, exc, tb))
    return ["error", kind.__module__, kind.__qualname__, _repr_message(exc), text]


def _repr_message(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:
        return ""


# --- the checker --------------------------------------------------------------------------------------


class ProgramError(Exception):
    """The program raised an exception of its own type while the tests called it."""


class ProgramEnded(BaseException):
    """The program's process ended while the tests were still running.

    Not an ``Exception``: tests that catch everything a call raises must not run on past it.
    """


class Checker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ended = False  # once the program's process is gone, the tests cannot pass, whatever they catch

    def ask(self, request: list[Any]) -> Any:
        try:
            self.channel.send(request)
            reply = self.channel.receive()
        except (OSError, EOFError, ValueError) as exc:
            self.ended = True
            raise ProgramEnded("the program ended before the tests did") from exc
        if reply[0] == "error":
            raise _local_exception(reply)
        return reply

    def call(self, target: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        sent = [encode(a, None) for a in args]
        reply = self.ask(["call", target, sent, {str(k): encode(v, None) for k, v in kwargs.items()}])
        for index, data in reply[2].items():
            _update(args[int(index)], decode(data, None, self))
        return decode(reply[1], None, self)

    def operate(self, op: str, ref: int, *args: Any) -> Any:
        return decode(self.ask(["op", op, ref, *(encode(a, None) for a in args)])[1], None, self)

    def wait_ready(self) -> None:
        try:
            self.channel.receive()
        except (OSError, EOFError, ValueError) as exc:
            self.ended = True
            raise ProgramEnded("the program ended before the tests did") from exc

    def same(self, ref: int, other: int) -> bool:
        return bool(self.ask(["same", ref, other])[1])

    def names(self, wanted: list[str]) -> dict[str, Any]:
        found = {}
        for name, (kind, *data) in self.ask(["names", wanted])[1].items():
            if kind == "module":
                found[name] = importlib.import_module(str(data[0]))
            else:
                found[name] = self._function(name) if kind == "fn" else decode(data[0], None, self)
        return found

    def _function(self, name: str) -> Any:
        def stand_in(*args: Any, **kwargs: Any) -> Any:
            return self.call(["name", name], args, kwargs)

        stand_in.__name__ = stand_in.__qualname__ = name
        return stand_in


def _update(original: Any, changed: Any) -> None:
    if original == changed:
        return
    if isinstance(original, list) and isinstance(changed, list):
        original[:] = changed
    elif isinstance(original, (dict, set)) and type(changed) is type(original):
        original.clear()
        original.update(changed)
    elif isinstance(original, bytearray) and isinstance(changed, bytearray):
        original[:] = changed


def _local_exception(reply: list[Any]) -> BaseException:
    _, module, name, message, text = reply
    kind = getattr(builtins, name, None) if module == "builtins" else None
    if isinstance(kind, type) and issubclass(kind, BaseException) and not issubclass(kind, _UNCATCHABLE):
        try:
            exc = kind(message)
        except BaseException:
            exc = ProgramError(f"{name}: {message}")
    else:
        exc = ProgramError(f"{name}: {message}")
    if hasattr(exc, "add_note"):
        exc.add_note("In the program:\n" + text.rstrip())
    return exc


def _free_names(code: types.CodeType) -> set[str]:
    """Every name the tests' code could look up (the program's names among them are asked for)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _free_names(const)
    return names


def _end_like(status: int) -> None:
    """End as the program's process ended (its exit code, or its signal), but never with success."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit((os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1) or WRONG_ANSWER)


def _fail(code: int, checker_writes: int, pid: int) -> None:
    kind, exc, tb = sys.exc_info()
    traceback.print_exception(kind, exc, tb.tb_next if tb is not None else None)  # from the tests' frame on
    os.close(checker_writes)  # the program's process ends when the checker hangs up
    os.waitpid(pid, 0)
    sys.stderr.flush()
    os._exit(code)


def _read_program() -> str:
    """The program, read from fd 0 exactly to its end: a buffered read would take the tests with it, into
    memory that the program's process inherits."""
    size = b""
    while not size.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            raise EOFError("no program on stdin")
        size += byte
    left, parts = int(size), []
    while left > 0:
        part = os.read(0, min(left, 1 << 20))
        if not part:
            raise EOFError("the program on stdin is cut short")
        parts.append(part)
        left -= len(part)
    return b"".join(parts).decode("utf-8", "surrogatepass")


def main() -> None:
    _set_dumpable(False)
    program_reads, checker_writes = os.pipe()
    checker_reads, program_writes = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    # Fork first, before this process touches its memory: every page written after a fork is copied.
    pid = os.fork()
    if pid == 0:
        os.close(checker_writes)
        os.close(checker_reads)
        _program(Channel(program_reads, program_writes))
        os._exit(1)  # not reached: the program's process ends in _finish
    os.close(program_reads)
    os.close(program_writes)
    # The program can write files beside this script: nothing there may be imported here, by the tests or
    # by a module the program names.
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    sys.path[:] = [p for p in sys.path if p not in ("", ".", here, os.getcwd())]
    checker = Checker(Channel(checker_reads, checker_writes))
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        checker.wait_ready()  # the program's process has read its part of stdin and let go of it
        code = compile(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"), "<tests>", "exec")
        scope.update(checker.names(sorted(n for n in _free_names(code) if not hasattr(builtins, n))))
        exec(code, scope)
    except ProgramEnded:
        _end_like(os.waitpid(pid, 0)[1])
    except AssertionError:
        _fail(WRONG_ANSWER, checker_writes, pid)
    except BaseException:
        _fail(1, checker_writes, pid)
    # The tests ran to their end. The program's process ends now (its threads, atexit): the run passed if
    # it ends cleanly, as a program that exits 0 after its tests would.
    os.close(checker_writes)
    _, status = os.waitpid(pid, 0)
    if checker.ended or os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0:
        _end_like(status)
    sys.stdout.flush()
    sys.exit(0)


if __name__ == "__main__":
    main()
