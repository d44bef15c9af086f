"""The import path of a process that judges programs of its own run: nothing on it that a program can write.

A notebook kernel runs a reward script that starts the model's program (open-r1's ``python3 -c code``) in
the same scratch directory, as the same uid, and imports modules after it ran: a module the program wrote
there (``json.py``, ``difflib.py``, a package) would run in the judge, with the tests and the answers in its
reach. ``python3 -I`` keeps the script's directory and the working directory off the path; this does the
same for a process that already runs, whatever put such entries there (``''``, a relative entry, the
directory of its main script), by the one rule that covers them all: what this process may write to, a
program of its run may too, so it is no place to import from.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TypeVar

T = TypeVar("T")


def _writable(entry: str) -> bool:
    """Whether this process could put a module at ``entry`` (a directory or a zip archive), or the nearest
    directory above it that exists (where it could make one)."""
    path = os.path.abspath(entry or os.curdir)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    if os.path.isdir(path):
        return os.access(path, os.W_OK)
    return os.access(path, os.W_OK) or os.access(os.path.dirname(path), os.W_OK)


def isolate() -> None:
    """Drop every entry of ``sys.path`` this process could write to, and forget what was found there."""
    sys.path[:] = [entry for entry in sys.path if not _writable(entry)]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


class Guard:
    """What a judge of a set of tests (a checker's child, and the fork of it each run is judged in) lets run, from
    when it is made: never a file under ``place`` (its run's directory, which the program writes), nor a module found
    anywhere but on its path as it began (``monkeypatch.syspath_prepend(tmp_path)`` adds a directory the program
    writes: a module there, a ``.pyc`` or an extension too, is refused). Once :meth:`arm` ed (the tests compiled),
    any code run that is neither the tests' nor a module's it imports (code the tests ``eval`` or ``exec`` from what
    the program returned, a pickle of the program's they load) *taints* it: a byte on ``taint_fd``, written before
    that code runs, so that nothing it does can take it back, tells the checker to end the judge after the run: no
    later run (of another program, another client) is judged where a program's code ran. Once it knows the run's
    program (:meth:`arm` ``program``), it refuses to compile the program's text (:class:`ProgramCode`): tests that
    ``exec(open('solution.py').read(), ns)`` would run the program's code here, where its values are real objects.

    An audit hook, which nothing this process runs later can take away, and a finder first on ``sys.meta_path``.
    """

    def __init__(self, place: str, taint_fd: int = -1) -> None:
        self.root = os.path.realpath(place) + os.sep
        self.taint_fd, self.armed, self.codes, self.tainted_run = taint_fd, False, frozenset[object](), False
        trusted = [os.path.realpath(e) + os.sep for e in sys.path if e and os.path.isdir(e)]
        self.trusted = tuple(t for t in trusted if not t.startswith(self.root))
        import collections
        import dataclasses

        external = sys.modules.get("importlib._bootstrap_external")
        bootstrap = sys.modules.get("importlib._bootstrap")
        # The frames through which an import unmarshals and runs a module's code, and the standard library makes
        # code of the tests' own definitions (a dataclass's methods, a namedtuple's ``__new__``: names it checks).
        self.importing = frozenset(
            getattr(getattr(m, n, None), "__code__", None)
            for m, n in (
                (bootstrap, "_call_with_frames_removed"),
                (external, "_compile_bytecode"),
                (dataclasses, "_create_fn"),
                (collections, "namedtuple"),
            )
        )
        self.module_exec = getattr(getattr(bootstrap, "_call_with_frames_removed", None), "__code__", None)
        self.text = ProgramLines(None, frozenset())
        self.refusal: str | None = None  # the run's: its error, whatever the tests caught
        import ast

        self.parse = ast.parse.__code__  # a parse only makes a tree: reading the text as data runs none of it
        sys.addaudithook(self._hook)
        sys.meta_path.insert(0, _Finder(self))
        _GUARDS.append(self)

    def arm(self, code: object, program: str | None = None) -> None:
        """From now on, code that is not ``code``'s (the tests', with all the code objects in it) taints, and the
        text of ``program`` (the run's) is not compiled."""
        self.codes, self.armed = frozenset(code_objects(code)), True
        self.text = ProgramLines(program, frozenset(string_lines(code)))

    def refused(self, where: object) -> bool:
        """Whether ``where`` (a file name) is under the run's directory."""
        if isinstance(where, bytes):
            where = os.fsdecode(where)
        # A name in brackets is no file (``<tests>``, ``<string>``); any other, relative too, is one.
        return isinstance(where, str) and not where.startswith("<") and os.path.realpath(where).startswith(self.root)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if event == "exec" and args:
            if self.refused(getattr(args[0], "co_filename", "")):
                raise ImportError(f"{getattr(args[0], 'co_filename', '')}: the run's directory runs nothing here")
            if self.armed and args[0] not in self.codes and not self._importing():
                self._taint()
        elif event == "compile" and len(args) > 1:
            if self.refused(args[1]):
                raise ImportError(
                    f"{args[1]!r} is in the run's directory, which the program writes: none of it runs here"
                )
            if self.text.lines and self.text.holds(args[0]) and not self._reading():
                self.refusal = self.refusal or (
                    "the tests compiled the program's text: its code would run in the checker, where its values "
                    "are no plain data"
                )
                raise ProgramCode(self.refusal)
        elif self.armed and (
            (
                event in ("marshal.loads", "marshal.load", "object.__setattr__", "object.__delattr__")
                and not self._importing()
            )
            or event == "pickle.find_class"
        ):
            self._taint()  # a class's attribute rebound too (``object.__setattr__`` on a type): nothing an import did

    def _importing(self) -> bool:
        """Whether the code that called the audited function is an import's (a module of the judge's own path,
        run as it is imported: what it makes of code there, pytest's plugins' and attrs' classes among it, is the
        library's), or one of the standard library's makers of code from the tests' own definitions."""
        caller = sys._getframe(2)  # the hook's own, then the code that called the audited function
        if caller.f_code in self.importing:
            return True
        frame = caller.f_back
        while frame is not None:
            if frame.f_code is self.module_exec:
                return True
            frame = frame.f_back
        return False

    def _reading(self) -> bool:
        """Whether the compile is a parse (``ast.parse``: a tree, no code) or the agent's own, which compiles the
        program's text to read it (its names, the code constants its stand-ins carry) and never runs it here."""
        caller = sys._getframe(2)  # this one's own, the hook's, then the code that called compile
        return caller.f_code is self.parse or str(caller.f_globals.get("__name__", "")).startswith(_AGENT)

    def armed_for(self, tests: T, program: str | None = None) -> T:
        """``tests`` (read and compiled), with this guard armed for their code and the run's ``program``."""
        self.arm(getattr(tests, "code", None), program)
        return tests

    def begin_run(self) -> None:
        """A run of the judge begins: whether code of the program's ran is asked of this run alone."""
        self.tainted_run, self.refusal = False, None

    def _taint(self) -> None:
        self.tainted_run = True
        if self.taint_fd >= 0:
            try:
                os.write(self.taint_fd, b"t")
            except OSError:
                pass
            self.taint_fd = -1  # once said is enough: the byte cannot be taken back


class ProgramCode(BaseException):
    """The tests compiled the program's text. Not an ``Exception``: no ``except Exception`` of the tests' goes on as
    if it had run, and the run is an error whatever they catch (:func:`said`)."""


_AGENT = __name__.rpartition(".")[0] + "."


def _lines(text: str) -> set[str]:
    """The lines of ``text``, stripped, as written and without a doctest prompt (an example's source)."""
    lines = {line.strip() for line in text.splitlines()}
    lines |= {line[3:].strip() for line in lines if line.startswith((">>>", "..."))}
    return lines - {""}


def string_lines(code: object) -> set[str]:
    """The lines of the strings ``code`` holds (its docstrings too): see :func:`_lines`."""
    lines: set[str] = set()
    for item in code_objects(code):
        for const in getattr(item, "co_consts", ()):
            if isinstance(const, str):
                lines |= _lines(const)
    return lines


class ProgramLines:
    """The lines of the run's program's text (as written, and as ``ast.unparse`` writes its tree) that the tests'
    strings do not hold: a source to compile is the program's where every line of it is the program's or the
    tests', and one at least the program's alone (the whole text, a function's segment, either with the tests' own
    lines added), or where it holds the program's whole text."""

    def __init__(self, program: str | None, tests: frozenset[str]) -> None:
        self.program, self.lines, self.tests = set[str](), frozenset[str](), tests
        self.whole = (program or "").strip()
        if program is None:
            return
        self.program = _lines(program)
        try:
            import ast

            self.program |= _lines(ast.unparse(ast.parse(program)))
        except BaseException:  # no tree: its lines as written are all it has
            pass
        self.lines = frozenset(self.program - tests)

    def holds(self, source: object) -> bool:
        """Whether ``source`` (text, bytes or a tree, as the ``compile`` audit event gives it) is the program's."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            text = bytes(source).decode("utf-8", "replace")
        elif isinstance(source, str):
            text = source
        else:
            try:
                import ast

                text = ast.unparse(source)  # type: ignore[arg-type]
            except BaseException:
                return True  # a tree that cannot be written out is none the tests' text could vouch for
        own = _lines(text)
        if own.isdisjoint(self.lines):
            return False
        return own <= self.program | self.tests or (bool(self.whole) and self.whole in text)


class _Finder:
    """First on ``sys.meta_path``: a module found anywhere but on the path as the judge began is refused."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path, target)  # type: ignore[arg-type]
        origin = getattr(spec, "origin", None)
        if spec is None or not isinstance(origin, str) or not os.path.isabs(origin):
            return None  # built in, frozen, a namespace package, or none: the machinery goes on
        real = os.path.realpath(origin)
        if self.guard.refused(real) or not real.startswith(self.guard.trusted):
            raise ImportError(f"{name} is found at {origin}, off the checker's own path: a program may write there")
        return None  # where the machinery finds it too


_GUARDS: list[Guard] = []  # this process's guard, where it has one


def ran_foreign_code() -> bool:
    """Whether code that is not the tests' ran in this run of the judge (see :class:`Guard`)."""
    return any(guard.tainted_run for guard in _GUARDS)


def said() -> bool:
    """Whether this run's tests compiled the program's text (see :class:`Guard`), whatever they caught: its reason
    goes to stderr."""
    refusal = next((guard.refusal for guard in _GUARDS if guard.refusal is not None), None)
    if refusal is None:
        return False
    try:
        print(f"{ProgramCode.__name__}: {refusal}", file=sys.stderr)
    except BaseException:
        pass
    return True


def code_objects(code: object) -> set[object]:
    """``code`` (a code object, or None for none) and every code object in it, its functions' and classes'."""
    found: set[object] = set()
    todo = [code] if code is not None else []
    while todo:
        item = todo.pop()
        found.add(item)
        todo.extend(c for c in getattr(item, "co_consts", ()) if hasattr(c, "co_code") and c not in found)
    return found
