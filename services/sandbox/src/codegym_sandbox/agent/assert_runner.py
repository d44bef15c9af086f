"""Runs a program against assert tests so that nothing the program does can produce a pass.

The main script of every assert-test run is :data:`ASSERT_MAIN`, two lines that call :func:`main` (its stdin:
``assert_stdin``): this module is part of the agent, loaded by the box before it forks, so a run compiles nothing of it.

Two processes, so that the pass signal never depends on anything the program can reach:

* the **checker** runs the tests (:func:`check`) with every name they take from the program (``candidate``, helpers
  such as HumanEval's ``poly``, constants) replaced by a stand-in that asks the program's process. It asks only for
  names the program binds at top level (``program_names``, read from the program's code) that are no builtins, and
  reads only answers of the shape it asked for (``checker_wire``): every other name the tests use is its own. No
  process of the program's may read its memory or descriptors (it is not dumpable, and in a test series it keeps the
  supervisors' uid), and the program's process never holds the tests;
* the **program's process** (``program_process``) has ``/dev/null`` as stdin, runs the program as a module that is not
  ``__main__`` (a demo under ``if __name__ == "__main__":`` does not run, as in the reference harnesses), then answers
  calls with plain data (see ``plain_data``). A value's own ``__eq__`` never runs in the checker, so an object that
  equals everything is a wrong answer, and the tests' expected values never reach the program.

Function-call tests run the same way, with a :class:`call_test.Call` in place of the tests' code (see ``call_test``).

An exception the program raises reaches the tests as the same builtin type, never as one that drives their control
flow (``program_errors``); one they let through is the program's runtime error (its ``AssertionError`` too). The
verdict (``assert_outcome.outcome_status``) is the checker's, which the program cannot set: 0 when the tests ran to
their end and the program's process then ended cleanly, :data:`assert_outcome.WRONG_ANSWER` when an assertion failed
or the program ended before the tests did, and otherwise what the program's own failure was (its exit code, or its
signal, so that a CPU limit still reads as one).

Run on its own (:func:`main`), the checker is the run's process and forks the program's process. In a series of the box
(many assert runs, one after another, see ``test_series.TestSeries``) the checker is one process for the whole series
(:func:`assert_checker.serve_checker`): the box forks each run's program's process (:func:`serve_program`) and the
checker runs that run's tests, so a run pays for one process, not two.
"""

from __future__ import annotations

import builtins
import importlib
import os
import signal
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any, TypeVar

from . import (
    call_test,
    checker_wire,
    import_path,
    linux,
    patched_builtins,
    program_doctests,
    program_file,
    program_module,
    program_names,
    program_text,
    pytest_fixtures,
    ran_tests,
    shared_state,
    test_forms,
    test_scope,
    uncarried,
)
from .assert_outcome import OUTCOMES, outcome_status
from .assert_stdin import ASSERT_MAIN as ASSERT_MAIN  # the main script of every assert run
from .assert_stdin import read_program, read_text
from .call_values import Aliases
from .patched_builtins import NONE, Flags
from .plain_channel import Channel
from .plain_data import decode, encode, encode_call
from .program_errors import (
    ExceptionClasses,
    ProgramEnded,
    local_exception,
    nearest_builtin,
    program_traceback,
    undefined,
    unimported,
)
from .program_function import ProgramFunction
from .program_handle import Handle
from .program_process import serve_program as serve_program  # the box forks each run's program process with it
from .test_forms import Tests, read_tests

_BUILTINS = frozenset(dir(builtins))
T = TypeVar("T")
R = TypeVar("R")


# --- the checker --------------------------------------------------------------------------------------
class Checker:
    """The tests' side of the channel to the program's process: it reads only what it asked for (``checker_wire``)."""

    def __init__(self, channel: Channel, source: str | None = None, sent: bool = False) -> None:
        self.channel = channel
        self.source: types.CodeType | str | None = None  # the program, while the program's process waits for it
        self.defined: frozenset[str] = frozenset()  # what the program binds at top level: all the tests may ask
        self.classes, self.text = ExceptionClasses(), program_text.Text(None)  # its text: ``program_function``
        # One exchange at a time (answers carry no id), refused where one process would differ (``uncarried``).
        self.turns = uncarried.Turns()
        if source is not None:
            self.take(source, sent)
        self.ended = False  # once the program's process is gone, the tests cannot pass, whatever they catch
        self.broken = False  # once it answered what was not asked, neither
        self.imported = False  # whether the program made this process import a module (a numpy array it returned)
        # What the tests patch (``patched_builtins``): its streams, names bound to theirs (``set_name``), one running.
        self.streams, self.bound, self.serving = patched_builtins.streams(), dict[str, Any](), False
        self.state = shared_state.Sent()
        self.functions, self.module_name = dict[str, Any](), "__main__"  # its functions' stand-ins; their module

    def take(self, source: str, sent: bool = False) -> None:
        """The run's program: to send first (unless the program's process has it), and the names it binds."""
        code = program_names.compiled(source) if not sent else source
        self.source = None if sent else code
        self.defined, self.text = program_names.top_level_names(code), program_text.Text(source)
        self.turns.program(source)  # what it looks up as it runs, before the tests patch any of it
        self.classes = ExceptionClasses()  # this program's exception types, as the tests see them
        # The checker's own compile: a SyntaxError the tests raise, or the program raises running, is not its own.
        self.unparsed = isinstance(code, str) and not program_names.compiles(code)

    def close(self) -> None:
        """Hang up: the program's process ends (its threads, ``atexit``) when it sees the channel close."""
        self.channel.close()

    def ask(self, request: list[Any], kind: type[T], patched: Flags = NONE, given: Any = None) -> T:
        """The program's answer to ``request``, read as ``kind``; first, in a call, what it asks of the builtins the
        tests ``patched`` (``patched_builtins``), and what a call that raised changed of its ``given`` values (its
        ``Aliases``, and how many). Any answer that does not follow is none (``checker_wire.read``)."""
        with self.turns:
            if self.serving:  # the tests' patched input calls the program, which waits for it
                raise RuntimeError("the tests called the program while the program waited for them")
            if self.ended:  # its process is gone, or waits for an answer to a callback it never got
                raise ProgramEnded("the program ended before the tests did")
            try:
                reply = self.channel.ask(request)
                while (patched != patched_builtins.NONE or self.bound) and (
                    callback := self._guard(checker_wire.callback, reply)
                ):
                    self.serving = True
                    try:
                        with self.turns.theirs():  # the tests' own patch runs, with their builtins
                            answer = self._guard(patched_builtins.serve, callback, patched, self.bound, self.decode)
                        self.channel.tell(answer)
                    except BaseException:
                        self.ended = True  # the program waits for an answer it will never get: no more calls
                        raise
                    finally:
                        self.serving = False
                    reply = self.channel.receive()
            except BaseException as exc:  # one left unfinished (a signal handler of the tests'): no more calls
                self.ended = True  # its late answer would be read as the next call's
                if isinstance(exc, (OSError, EOFError, ValueError)):
                    raise ProgramEnded("the program ended before the tests did") from exc
                raise
            try:
                return checker_wire.read(reply, kind)
            except checker_wire.Raised as raised:
                self.fill(raised.changed, *(given or (Aliases(), 0)))  # as a caller would see them, then the error
                error = raised.error  # its arguments and attributes as values here, as any of the program's
                error["args"] = [self.decode(a) for a in error["args"]]
                error["attributes"] = {k: self.decode(v) for k, v in error["attributes"].items()}
                raise local_exception(error, self.classes) from None
            except checker_wire.Breach:
                self.broken = True
                raise

    def call(self, target: list[Any], args: Any, kwargs: dict[str, Any], data: bool = False) -> Any:
        """Call the program's function ``target``; with ``data``, what it returned as wire data."""
        with self.turns:  # what it sends of the state is what this call's answer changes
            # With what the tests patched, set of the interpreter's state (``shared_state``), and gave (``Aliases``).
            patched, (sent, named, aliases) = patched_builtins.patched(self.streams), encode_call(args, kwargs)
            request = ["call", target, sent, named, patched, self.state.changed(), not data]
            answer = self.ask(request, checker_wire.CallAnswer, patched, given := (aliases, len(aliases.values)))
            self.classes.reissue(answer["warnings"])  # the program's warnings, to the tests' filters
            value = answer["value"] if data else self.decode(answer["value"], aliases)
            self.fill(answer["changed"], *given)  # after the value, as written: their new values are numbered so
            return value

    def fill(self, changed: dict[str, Any], aliases: Aliases, given: int) -> None:
        """The tests' values a call changed in place (of the ``given`` first of its ``aliases``), changed so here."""
        for index, now in self._guard(checker_wire.changed, changed, given):
            self.decode(now, aliases, into=aliases.values[index])

    def call_named(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """What the program's function ``name`` returned (wire data), for a call test."""
        return self.call(["name", name], args, kwargs, data=True)

    def operate(self, op: str, ref: int, *args: Any) -> Any:
        request = ["op", op, ref, *(encode(a, None) for a in args)]
        return self.decode(self.ask(request, checker_wire.ValueAnswer)["value"])

    def decode(self, data: Any, aliases: Aliases | None = None, into: Any = None) -> Any:
        """A value of the program's, here (see ``plain_data.decode``), noting what it made this process import."""
        before = len(sys.modules)
        try:
            value = decode(data, None, self, aliases, into)
        except Exception as exc:  # checked as wire data, yet not a value (a dict key that is a list)
            self.broken = True
            raise checker_wire.Breach(f"the program's process answered what is no value: {exc}") from None
        self.imported = self.imported or len(sys.modules) != before
        return value

    def same(self, ref: int, other: int) -> bool:
        return self.ask(["same", ref, other], checker_wire.SameAnswer)["same"]

    def names(self, wanted: list[str]) -> dict[str, Any]:
        """The program's values of the names ``wanted`` (after the program, sent first if it waits for it)."""
        request = ["names", wanted] if self.source is None else ["program", self.source, wanted]
        self.source = None
        answer = self._guard(checker_wire.names, self.ask(request, checker_wire.NamesAnswer), frozenset(wanted))
        found: dict[str, Any] = {name: self._function(name) for name in answer["functions"]}
        for name, pair in answer["modules"].items():
            module, ref = (pair[0], pair[1:]) if pair else ("", [])
            # The checker's own copy only of the module the tests' name names (``math``, ``np``, ``os`` of
            # ``import os.path``); any other (``import statistics as st``) is the program's, used in its process:
            # the checker would otherwise run the code of a module the program chose (``import _thread as Menu``,
            # whose ``exit()`` ends the tests).
            top = module.partition(".")[0] if type(module) is str else ""
            if top and program_names.module_of(name) in (module, top):
                found[name] = self.load(module)
            else:
                found[name] = self.decode(ref[0]) if len(ref) == 1 else unimported(name, str(module))
        for name, where in answer["library"].items():
            library = program_names.library_object(*where) if len(where) == 2 else None
            found[name] = library if library is not None else unimported(name, str(where))
        for name, lineage in answer["exceptions"].items():
            found[name] = self.classes.of(lineage, nearest_builtin(lineage))
        found.update((name, self.decode(data)) for name, data in answer["values"].items())
        return found

    def load(self, module: str) -> types.ModuleType:
        """The module ``module``, imported here (its ``ImportError`` is the tests' error)."""
        before = len(sys.modules)
        try:
            return importlib.import_module(module)
        except SystemExit as exc:  # never the tests' own exit, which would say they passed
            raise ImportError(f"importing {module} exited: {exc!r}") from None
        finally:
            self.imported = self.imported or len(sys.modules) != before

    def set_name(self, name: str, value: Any) -> None:
        """Bind the program's top-level ``name`` to ``value``: plain data, a handle of the program's, or a function
        of the tests' (a mock), which the program's calls of ``name`` then call here; its own function again (or
        ``program_module.PUT_BACK``) puts the program's back."""
        if value is self.functions.get(name) or value is program_module.PUT_BACK:
            self.ask(["restore", name], checker_wire.ValueAnswer)
            self.bound.pop(name, None)
        elif isinstance(value, Handle) or not callable(value):
            self.ask(["set", name, encode(value, None)], checker_wire.ValueAnswer)
        else:
            self.ask(["stub", name], checker_wire.ValueAnswer)
            self.bound[name] = value

    def output(self, what: str) -> tuple[str, str]:
        """What the program printed, for the tests' ``capsys`` (see ``program_process._output``); nothing yet while
        the program waits for a builtin the tests patched (it prints before it asks, and is read after)."""
        if self.serving:
            return "", ""
        answer = self.ask(["output", what], checker_wire.OutputAnswer)
        return answer["out"], answer["err"]

    def _guard(self, read: Callable[..., R], *args: Any) -> R:
        try:
            return read(*args)
        except checker_wire.Breach:
            self.broken = True
            raise

    def _function(self, name: str) -> Any:
        return self.functions.setdefault(name, ProgramFunction(name, self, self.text, self.module_name))


def check(checker: Checker, tests: Tests) -> str:
    """Run ``tests`` (compiled, or a call test) against the program behind ``checker``, in a scope of their own.

    The outcome: ``passed`` (the tests ran to their end), ``failed`` (an assertion failed), ``error`` (any
    other exception: its traceback goes to stderr, from the tests' frame on) or ``ended`` (the program's
    process ended first). The channel is closed when it returns: the program's process ends then.
    """
    module = types.ModuleType("__main__")
    scope: dict[str, Any] = module.__dict__
    scope["__builtins__"], scope["__file__"] = builtins, "main.py"
    outcome = "passed"
    try:
        if isinstance(tests, call_test.Call):
            checker.names([])  # the program runs
            if not tests.judge(checker.call_named):
                outcome = "failed"
        else:
            # Only names the program binds itself: every other name the tests use (a builtin, a helper of theirs) is
            # the checker's own, whatever the program answers; a name they use as a module is the module.
            wanted, modules = program_names.asked(tests.code, checker.defined, _BUILTINS, tests.declared)
            checker.module_name = "__main__" if program_names.imports_program(tests.code) is None else "solution"
            found = checker.names(wanted)
            # A declared entry point the program has not defined is its NameError, never a builtin of the name.
            scope.update({name: undefined(name) for name in tests.declared}, **found)
            ran = ran_tests.recorder(scope)
            checker.state.random = "random" in program_names.used_names(tests.code)  # a state theirs to send
            scope.update((name, checker.load(module)) for name, module in modules.items())
            program_names.load_submodules(tests.code, scope, checker.load)
            star = program_names.star_names(checker.defined, _BUILTINS, tests.declared, tests.code)
            with (
                test_scope.as_main(module),
                test_scope.no_runner_main(tests.code),
                program_module.importable(checker.names, checker.set_name, star, checker.text.every),
                program_doctests.guarded(tests.code, checker),
            ):
                try:
                    exec(tests.code, scope)
                except SystemExit as exc:  # the tests' own (see below): pytest would still run their functions
                    if not test_forms.ended_well(exc, getattr(tests, "code", None)):
                        raise
                fixtures = pytest_fixtures.fixtures(checker.output)
                test_forms.run_collected(tests.code, scope, tests.declared, ran, fixtures, whole_file=tests.whole_file)
    except ProgramEnded:
        outcome = "ended"
    except SystemExit as exc:  # the tests' own: the program's arrives as a ProgramInterrupt, or ends its process
        outcome = "passed" if test_forms.ended_well(exc, getattr(tests, "code", None)) else "failed"
    except BaseException as exc:
        outcome = test_forms.outcome_of(exc)
        kind, error, tb = sys.exc_info()
        try:
            if isinstance(exc, checker_wire.Breach):  # not the tests' error, nor the program's: what it did
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            elif isinstance(tests, call_test.Call):  # no frame of the tests': the program's traceback, or the error
                text = program_traceback(exc) or "".join(traceback.format_exception_only(exc))
                print(text.rstrip(), file=sys.stderr)
            else:
                traceback.print_exception(kind, error, tb.tb_next if tb is not None else None)
        except BaseException:
            pass
    finally:
        scope.clear()  # the program's values (handles) go with the run
        checker.close()
    if checker.broken or checker.turns.said() or import_path.said():
        return "error"  # an answer not asked for, a call refused, the program's text compiled: whatever was caught
    if checker.unparsed:  # as in `python main.py`, whose compile fails before any test runs
        return "unparsed"
    return "ended" if outcome == "passed" and checker.ended else outcome


def check_read(checker: Checker, tests: Callable[[], Tests]) -> str:
    """:func:`check` on the tests that ``tests`` reads and compiles; if that fails, the run's outcome is
    ``error`` (its traceback on stderr) and the program's process is let go."""
    try:
        code = tests()
    except BaseException:
        traceback.print_exc()
        checker.close()
        return "error"
    return check(checker, code)


def main() -> None:
    """The run on its own: this process is the checker, and forks the program's process."""
    linux.set_dumpable(False)
    program_reads, checker_writes = os.pipe()
    checker_reads, program_writes = os.pipe()
    sys.stdout.flush(), sys.stderr.flush()
    # The program first (it is not secret from the program's process), and only after the fork the tests:
    # the program's process never holds them, and gives up stdin before it runs anything of the program's.
    program_file.lay_out(source := read_program(0))  # the reference layout's solution.py, before the program runs
    pid = os.fork()
    if pid == 0:
        os.close(checker_writes)
        os.close(checker_reads)
        os.dup2(null := os.open(os.devnull, os.O_RDONLY), 0)
        os.close(null)
        linux.set_dumpable(True)
        serve_program(Channel(program_reads, program_writes), source)
    os.close(program_reads)
    os.close(program_writes)
    here = os.path.dirname(os.path.abspath(sys.argv[0]))  # the program writes there: nothing of it runs here
    sys.path[:] = [p for p in sys.path if p not in ("", ".", here, os.getcwd())]
    guard = import_path.Guard(os.getcwd())
    # The tests run in a child that says its outcome: an exit of it (the program's code they ran) is an error.
    said, say = os.pipe2(os.O_NONBLOCK)
    judge = os.fork()
    if judge == 0:
        os.close(said)
        checker = Checker(Channel(checker_reads, checker_writes), source, sent=True)
        outcome = check_read(checker, lambda: guard.armed_for(read_tests(read_text(0)), source))
        sys.stdout.flush(), sys.stderr.flush()
        os.write(say, outcome.encode())
        os._exit(0)
    for fd in (say, checker_reads, checker_writes):
        os.close(fd)
    os.waitpid(judge, 0)
    try:
        outcome = os.read(said, 64).decode("ascii", "replace")
    except BlockingIOError:
        outcome = "error"
    outcome = outcome if outcome in OUTCOMES else "error"
    code, sig = outcome_status(outcome, os.waitpid(pid, 0)[1])
    sys.stdout.flush(), sys.stderr.flush()
    if sig is not None:
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # whose handler cannot be set (EINVAL): no handler takes them
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(code or 0)
