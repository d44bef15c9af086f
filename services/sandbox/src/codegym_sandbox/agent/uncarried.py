"""What a test can observe or set about the program that no call carries to its process: refused, loudly.

The program runs in a process of its own, and a call carries there only what the checker was taught to carry: the
values, what the call changed in place, exceptions and warnings (``program_process``), the interpreter's state
the tests set (``shared_state``: the recursion limit, ``random``'s state, the environment, ``sys.argv``, the working
directory), and the builtins and names the tests patched (``patched_builtins``: ``input``, ``print``, the standard
streams, ``solution.fetch``). Whatever else a test observes or sets about the program would be the checker's own,
silently: a ``mock.patch("time.sleep", side_effect=AssertionError)`` would pass a program that sleeps, a
``tracemalloc`` bound would measure the checker, ``assertNoLogs`` would pass a program that logs, and threads that
call an object of the program's at once would never see its race. So at each exchange with the program's process
(:class:`Turns`), the checker refuses to go on where the tests

- replaced a library function the program's text looks up as it runs (``patched_modules``),
- trace memory allocations (``tracemalloc``), which the program makes in its own process,
- capture log records (``assertLogs``, ``assertNoLogs``, pytest's handler, or a handler of their own that keeps
  them) on the root logger or on one the program's records reach (one its text names, or an ancestor of it; any,
  where it names one by a computed name), while the program imports ``logging`` (or can reach it by a road its text
  does not spell): its records are made and handled in its own process (a handler on the tests' own logger is
  theirs alone, as in one process), or
- call the program from a thread while a call from another thread is still under way: the program's process
  answers one call at a time, so a race of the program's would never show (a thread-safety test passed every
  program; calling it from one thread at a time, a watchdog thread among them, is as before).

A refusal is the run's error (``RE``, its reason on stderr), whatever the tests catch: never a pass, and never an
answer of the checker's own state.
"""

from __future__ import annotations

import _thread
import contextlib
import io
import sys
from collections.abc import Iterator

from . import patched_modules

_CAPTURING_MODULES = frozenset({"unittest._log", "_pytest.logging", "__main__"})  # ``__main__``: the tests' classes


class Refused(BaseException):
    """A call the checker cannot make as one process would make it. Not an ``Exception``: the tests' ``except
    Exception`` does not go on as if the call had run (their run is an error whatever they catch)."""


class Turns:
    """The exchanges of one run with the program's process (``with turns:``), one at a time, each refused where it
    cannot be made as in one process (see the module's docstring). Nested ones (an answer read within a call) are
    one turn."""

    def __init__(self) -> None:
        self.lock = _thread.RLock()
        self.depth = 0
        self.reason: str | None = None  # the first refusal's: the run's error
        self.watch = patched_modules.Watch(patched_modules.NOTHING)
        self.logs = False  # whether the program imports logging
        self.loggers: frozenset[str] | None = None  # those it names (``patched_modules.Reads.loggers``)
        self.builtins = patched_modules.OwnBuiltins()

    def program(self, source: str) -> None:
        """The run's program: what it looks up as it runs, read from its text before the tests run."""
        read = patched_modules.reads(source)
        # A program that reaches modules by roads its text does not spell may reach logging too.
        self.watch, self.logs = patched_modules.Watch(read), "logging" in read.modules or read.anything
        self.loggers = read.loggers

    def __enter__(self) -> None:
        """One exchange (or a call's exchanges): refused as the module's docstring says, else made with the
        checker's own builtins."""
        if not self.lock.acquire(blocking=False):
            self.refuse(
                "the tests called the program from a thread while a call from another was under way: the program's "
                "process answers one call at a time, so no race of the program's could show"
            )
        if self.depth == 0:
            try:
                self.refuse(self.reason or self._uncarried())
                self.builtins.own()
            except BaseException:
                self.lock.release()
                raise
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.builtins.theirs()
        self.lock.release()

    @contextlib.contextmanager
    def theirs(self) -> Iterator[None]:
        """Within a turn, the tests' own code (a callback runs their patch): with their builtins."""
        self.builtins.theirs()
        try:
            yield
        finally:
            self.builtins.own()

    def refuse(self, reason: str | None) -> None:
        """Refuse the run (``reason``: why), for this call and every later one; nothing where ``reason`` is None."""
        if reason is not None:
            self.reason = self.reason or reason
            raise Refused(self.reason)

    def said(self) -> bool:
        """Whether the run was refused: its reason goes to stderr (the tests may have caught the error)."""
        if self.reason is None:
            return False
        with contextlib.suppress(BaseException):
            print(f"{Refused.__name__}: {self.reason}", file=sys.stderr)
        return True

    def _uncarried(self) -> str | None:
        replaced = self.watch.replaced()
        if replaced is not None:
            return (
                f"the tests replaced {replaced}, which the program looks up as it runs: their patch does not reach "
                "the program's process"
            )
        tracing = sys.modules.get("tracemalloc")
        if tracing is not None and tracing.is_tracing():
            return "the tests trace memory (tracemalloc), which the program allocates in its own process"
        if self.logs and _capturing_logs(self.loggers):
            return "the tests capture log records, which the program makes and handles in its own process"
        return None


def _capturing_logs(named: frozenset[str] | None) -> bool:
    """Whether a logger here that the program's records reach has a handler that keeps them for the tests to read:
    the root, and each logger the program names (``named``) with its ancestors; every logger where ``named`` is
    None (the program may log to any). A handler on a logger of the tests' own is not the program's."""
    logging = sys.modules.get("logging")
    if logging is None:
        return False
    every = [v for v in list(logging.Logger.manager.loggerDict.values()) if isinstance(v, logging.Logger)]
    if named is not None:
        reached = {".".join(name.split(".")[:i]) for name in named for i in range(1, name.count(".") + 2)}
        every = [logger for logger in every if logger.name in reached]
    loggers = [logging.root, *every]
    buffering = getattr(sys.modules.get("logging.handlers"), "BufferingHandler", ())
    for logger in loggers:
        for handler in list(getattr(logger, "handlers", ())):
            if type(handler).__module__ in _CAPTURING_MODULES or isinstance(handler, buffering):
                return True
            if isinstance(getattr(handler, "stream", None), io.StringIO):
                return True
    return False
