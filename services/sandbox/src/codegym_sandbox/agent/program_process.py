"""The program's process of an assert or call run: run the program, then answer the checker's requests.

It runs the program as the module :data:`MODULE`, not ``__main__`` (a demo under ``if __name__ ==
"__main__":`` does not run, as in the reference harnesses), with ``/dev/null`` as stdin, and answers calls,
operations on its objects and comparisons with plain data (see ``plain_data``); an exception of the
program's goes back as its nearest builtin type, message, traceback, its type's lineage, and its plain arguments
and attributes. It never holds the tests (see
``assert_runner``).
"""

from __future__ import annotations

import builtins
import io
import itertools
import json
import operator
import os
import sys
import traceback
import types
import warnings
from typing import Any, NoReturn

from . import numpy_data, program_bytes, program_names, pyrun, shared_state
from .call_values import Aliases
from .checker_wire import CallAnswer, CallRaised, ErrorAnswer, NamesAnswer, OutputAnswer, ProgramWarning
from .handle_operators import NUMBERS, OPERATORS
from .patched_builtins import Stubs, forwarding
from .plain_channel import Channel
from .plain_data import as_handle, contents, decode, encode
from .program_errors import LINEAGE
from .program_handle import Refs

MODULE = "solution"  # the program's module name


def _finish(code: int, main: types.ModuleType | None = None) -> NoReturn:
    """End the program's process as the interpreter would (see ``pyrun.finish``)."""
    os._exit(pyrun.finish(code, main))


def serve_program(channel: Channel, program: types.CodeType | str | None = None) -> NoReturn:
    """In the program's process: run the program, then answer the checker until it hangs up.

    ``program`` is the program (its source, or its code), or None when the checker sends it first, with the
    names the tests want, whose description is the first answer. Standard input is ``/dev/null`` by now.
    Never returns, nor raises: the process was forked from a supervisor, whose frames lie below this one (a
    program that broke its own channel once went on there).
    """
    try:
        _serve(channel, program)
    except BaseException:
        pass
    os._exit(1)


def _serve(channel: Channel, program: types.CodeType | str | None) -> NoReturn:
    wanted: list[str] | None = None
    if program is None:
        try:
            _, program, wanted = channel.request()
        except (EOFError, ValueError):
            _finish(0)
    main = pyrun.new_main(os.path.abspath(sys.argv[0]), MODULE)
    scope = main.__dict__
    pyrun.enter()  # the program's top level starts a frame above this one, a call (in ``_call``) two
    try:
        if not isinstance(program, types.CodeType):
            program = program_bytes.compile_program(program, "<program>")
        exec(program, scope)
    except SystemExit as exc:
        _finish(pyrun.exit_code(exc), main)
    except BaseException:
        kind, error, tb = sys.exc_info()
        # Leave the sandbox's frames out (this module's, a compile's), on the exception too (the hook prints its own
        # traceback where it is given none): a compile error reads as Python's own for a file (the program's name and
        # line, the caret, ``SyntaxError: ...``), a runtime error from the program's first frame, as in
        # ``pyrun.run_script``; nothing of the sandbox's files shows.
        tb = pyrun.program_frames(tb)
        if error is not None:
            error.__traceback__ = tb
        sys.excepthook(kind, error, tb)  # type: ignore[arg-type]
        del kind, error, tb
        _finish(1, main)
    refs = Refs()
    stubs = Stubs(channel, refs)
    request: Any = ["names", wanted] if wanted is not None else None
    while True:
        if request is None:
            try:
                request = channel.request()
            except (EOFError, ValueError):
                _finish(0, main)
        try:
            if request[0] == "names":
                reply: Any = _names(scope, request[1], refs)
            elif request[0] == "output":
                reply = _output(str(request[1]))
            elif request[0] == "set":  # the tests' ``solution.LIMIT = 3``: the program's global, as in Python
                scope[str(request[1])] = decode(request[2], refs)
                reply = {"value": None}
            elif request[0] in ("stub", "restore"):  # the tests' mock.patch("solution.f"): a function of theirs
                stubs.rebind(scope, request[0], str(request[1]))
                reply = {"value": None}
            elif request[0] == "same":
                reply = {"same": bool(refs[request[1]] == refs[request[2]])}
            elif request[0] == "op":
                value = _operate(refs[request[2]], request[1], [decode(a, refs) for a in request[3:]])
                # An iterator as a handle, a generator too: never drained (an endless one is stepped as asked).
                reply = {"value": as_handle(value, refs) if request[1] in ("iter", "reversed") else encode(value, refs)}
            else:
                reply = _call(request, scope, refs, channel)
        except BaseException as exc:  # a SystemExit too: the tests may expect it (argparse's), as beside the program
            reply = _error(exc)
        request = None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        try:
            channel.answer(reply)
        except BaseException as exc:  # a value that cannot be written (a huge int, a cycle): an error
            channel.answer(_error(exc))


_CAPTURED: list[Any] = []  # while the tests' capsys holds the program's output: its streams, and the buffers
OUTPUT_READ = 8 << 20  # the most of each stream one read answers: a run's output limit


def _output(what: str) -> OutputAnswer:
    """What the program printed since the last read, for the tests' ``capsys`` (``pytest_fixtures``): ``capture``
    starts holding it, ``read`` answers it, ``release`` lets the program's output go where it went before."""
    if what == "capture" and not _CAPTURED:
        # Streams as a process's own are (``.buffer``, ``.encoding``), over bytes held here.
        held = [io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace") for _ in range(2)]
        _CAPTURED.extend([sys.stdout, sys.stderr, *held])
        sys.stdout, sys.stderr = held
    answer: OutputAnswer = {"out": "", "err": ""}
    if _CAPTURED:
        for key, stream in (("out", _CAPTURED[2]), ("err", _CAPTURED[3])):
            stream.flush()
            raw = stream.buffer
            answer[key] = raw.getvalue()[:OUTPUT_READ].decode("utf-8", "replace")  # type: ignore[literal-required]
            raw.seek(0)
            raw.truncate()
    if what == "release" and _CAPTURED:
        sys.stdout, sys.stderr = _CAPTURED[0], _CAPTURED[1]
        _CAPTURED.clear()
    return answer


def _raised(raised: Any) -> tuple[Any, Any, None]:
    """What the tests' block raised, for a context manager's ``__exit__``: its builtin type and message."""
    if raised is None:
        return None, None, None
    kind = getattr(builtins, str(raised[0]), None)
    kind = kind if isinstance(kind, type) and issubclass(kind, BaseException) else Exception
    try:
        return kind, kind(str(raised[1])), None
    except BaseException:
        return Exception, Exception(str(raised[1])), None


def _operate(value: Any, op: str, args: list[Any]) -> Any:
    """One of the operations a :class:`Handle` passes on, on the program's own object."""
    if op == "getattr":
        return getattr(value, str(args[0]))
    if op == "getitem":
        return value[args[0]]
    if op == "len":
        return len(value)
    if op in ("iter", "reversed"):  # its iterator (itself, where it is its own), stepped by the tests' next()
        return iter(value) if op == "iter" else reversed(value)
    if op == "batch":  # the next items of such an iterator that no test holds, and whether it ended
        wanted = max(1, min(int(args[0]), 1024))
        items = list(itertools.islice(value, wanted))
        return (len(items) < wanted, items)
    if op == "next":
        try:
            return (False, next(value))
        except StopIteration:  # the end of the program's iterator, not its error
            return (True, None)
    if op == "contains":
        return bool(args[0] in value)
    if op == "bool":
        return bool(value)
    if op == "hash":
        return hash(value)
    if op == "enter":
        return value.__enter__()
    if op == "exit":  # its answer is not asked: the block's error reaches the tests (see Handle.__exit__)
        value.__exit__(*_raised(args[0]))
        return None
    if op == "ne":
        return bool(value != args[0])
    if op in ("str", "repr"):
        return str(value) if op == "str" else repr(value)
    if op in ("isinstance", "issubclass"):
        return bool(isinstance(args[0], value) if op == "isinstance" else issubclass(args[0], value))
    if op == "format":
        return format(value, str(args[0]))
    if op == "setattr":
        setattr(value, str(args[0]), args[1])
    elif op == "delattr":
        delattr(value, str(args[0]))
    elif op == "setitem":
        value[args[0]] = args[1]
    elif op == "delitem":
        del value[args[0]]
    if op in ("setattr", "delattr", "setitem", "delitem"):
        return None
    if op == "round":
        return round(value, *args[:1])
    if op in NUMBERS:
        convert: Any = {"float": float, "int": int, "index": operator.index, "complex": complex}[op]
        return convert(value)
    if op in OPERATORS:  # the program's operators on its object (``program_handle.Handle``)
        name = op[1:] if op.startswith("r") and op[1:] in OPERATORS else op
        operands = (args[0], value) if name != op else (value, *args[:1])
        return getattr(operator, "and_" if name == "and" else "or_" if name == "or" else name)(*operands)
    raise TypeError(f"unknown operation {op!r}")


def _names(scope: dict[str, Any], wanted: list[str], refs: Refs) -> NamesAnswer:
    """The program's values of the names ``wanted`` that it has (see ``checker_wire.NamesAnswer``)."""
    answer: NamesAnswer = {"functions": [], "modules": {}, "exceptions": {}, "library": {}, "values": {}}
    for name in wanted:
        if name not in scope:
            continue
        value = scope[name]
        if isinstance(value, types.ModuleType):
            # The checker imports its own copy where the name names the module; else it uses the program's.
            answer["modules"][name] = [str(value.__name__), encode(value, refs)]
        elif isinstance(value, type) and issubclass(value, BaseException):
            answer["exceptions"][name] = _lineage(value)  # the checker makes a class of its own for it
        elif (where := program_names.library_type(value)) is not None:
            answer["library"][name] = where  # a type of the standard library's: the checker takes its own
        elif callable(value) and not isinstance(value, type):
            answer["functions"].append(name)
        else:
            answer["values"][name] = encode(value, refs)
    return answer


def _call(request: list[Any], scope: dict[str, Any], refs: Refs, channel: Channel) -> CallAnswer | CallRaised:
    _, target, args_data, kwargs_data, patched, state, shared = request
    shared_state.take(state)  # what the tests set of the interpreter's state, as in one process
    if target[0] == "name" and target[1] not in scope:
        raise NameError(f"name {target[1]!r} is not defined")
    function = scope[target[1]] if target[0] == "name" else refs[target[1]]
    # The arguments' lists, dicts, sets and bytearrays, numbered as the checker numbered the tests' own.
    aliases = Aliases()
    args = [decode(a, refs, None, aliases) for a in args_data]
    kwargs = {k: decode(v, refs, None, aliases) for k, v in kwargs_data.items()}
    given = [(value, _shallow(value)) for value in aliases.values]
    # Builtins the tests patched ask them (``patched_builtins``); every warning is kept for the tests' filters,
    # pytest.warns among them, which the checker's are (in one process, they would see each).
    # What crosses back is made under them too: a generator the call returned runs as it is encoded.
    with forwarding(channel, refs, patched), warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            # A result that is (or holds) an argument is that argument in the tests; a call test compares values.
            value = encode(function(*args, **kwargs), refs, aliases if shared else None)
        except BaseException as exc:  # what it changed before it raised, the tests see too (a SystemExit's too)
            aliases.cut(len(given))  # not the values of a result that raised as it was written: never sent
            return {"error": _error(exc)["error"], "changed": _after(given, refs, aliases)}
        after = _after(given, refs, aliases)
    return {"value": value, "changed": after, "warnings": [_warning(w) for w in issued[:WARNINGS]]}


def _after(given: list[tuple[Any, tuple[Any, ...]]], refs: Refs, aliases: Aliases) -> dict[str, Any]:
    """What the call changed in place of what it was given, however deep, as a caller would see it."""
    return {str(i): contents(v, refs, aliases) for i, (v, was) in enumerate(given) if _changed(v, was)}


def _shallow(value: Any) -> tuple[Any, ...]:
    """What a mutable value holds now: the items themselves (held, so that no other object takes their ids), or a
    bytearray's or an array's bytes (with the array's shape and dtype)."""
    if isinstance(value, bytearray):
        return (bytes(value),)
    if numpy_data.is_array(value):
        return (value.shape, value.dtype.str, value.tobytes())
    return tuple(x for pair in value.items() for x in pair) if isinstance(value, dict) else tuple(value)


def _changed(value: Any, was: tuple[Any, ...]) -> bool:
    """Whether anything in ``value`` was replaced, added, removed or moved since it held ``was``."""
    now = _shallow(value)
    if isinstance(value, bytearray) or numpy_data.is_array(value):
        return now != was
    return len(now) != len(was) or any(a is not b for a, b in zip(now, was, strict=True))


WARNINGS = 64  # the most warnings of one call that reach the tests


def _warning(issued: warnings.WarningMessage) -> ProgramWarning:
    try:
        message = str(issued.message)[:PLAIN_MOST]
    except BaseException:
        message = "?"
    where = issued.filename if type(issued.filename) is str else "?"
    line = issued.lineno if type(issued.lineno) is int else 0
    return {"lineage": _lineage(issued.category), "message": message, "filename": where[:200], "lineno": line}


def _error(exc: BaseException) -> dict[str, ErrorAnswer]:
    kind = type(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _error.__code__.co_filename:
        tb = tb.tb_next  # this file's frames: the traceback reads as the program's own
    text = "".join(traceback.format_exception(kind, exc, tb))
    # As the nearest builtin type it is one of: the tests' ``except ValueError`` catches the program's own
    # ``class InvalidInput(ValueError)`` and a ``json.JSONDecodeError``, as in Python (the traceback names it).
    builtin = next(k for k in kind.__mro__ if k.__module__ == "builtins")
    error: ErrorAnswer = {
        "module": "builtins",
        "name": builtin.__qualname__,
        "message": _repr_message(exc),
        "traceback": text,
        "lineage": _lineage(kind),
        "args": [],
        "attributes": {},
    }
    try:
        args = [_plain(a) for a in exc.args[:16]] if type(exc.args) is tuple and len(exc.args) <= 16 else [None]
        error["args"] = [a[0] for a in args if a is not None] if None not in args else []  # all of them, or none
        for key, value in list(vars(exc).items())[:64]:
            if type(key) is str and not key.startswith("_") and (data := _plain(value)) is not None:
                error["attributes"][key] = data[0]  # each that is plain data
        if isinstance(exc, SystemExit) and (code := _plain(exc.code)) is not None:
            error["attributes"]["code"] = code[0]  # a slot, not in its __dict__: what the tests' e.code reads
    except BaseException:
        pass
    return {"error": error}


PLAIN_MOST = 1 << 16  # an exception's argument or attribute that crosses as a value: at most this, encoded


def _lineage(kind: type) -> list[list[str]]:
    """Each class of ``kind``'s MRO before ``object`` (at most :data:`LINEAGE`), as its module and qualified name."""
    out = []
    for k in kind.__mro__[:LINEAGE]:
        if k is object:
            break
        module, name = getattr(k, "__module__", "?"), getattr(k, "__qualname__", "?")
        out.append([module[:200] if type(module) is str else "?", name[:200] if type(name) is str else "?"])
    return out


def _plain(value: Any) -> tuple[Any] | None:
    """``value`` as wire data (in a tuple), where it is plain data of at most :data:`PLAIN_MOST` characters on
    the wire; else None."""
    try:
        data = encode(value, None)
        return (data,) if len(json.dumps(data)) <= PLAIN_MOST else None
    except BaseException:
        return None


def _repr_message(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:
        return ""
