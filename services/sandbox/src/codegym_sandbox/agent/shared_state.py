"""State of the interpreter that the tests set and, in pytest's one process, the program shares: the recursion
limit (``sys.setrecursionlimit(10**4)`` before a deep recursion of the program's), the state of ``random``
(``random.seed(42)`` before a call of the program's that shuffles), the environment (``monkeypatch.setenv``),
``sys.argv`` and the working directory (``monkeypatch.chdir(tmp_path)``). Here the program runs in another process;
each call carries what of it the tests changed since the last call, and the program's process takes it first.

Only from the tests to the program: nothing the program's process does changes the checker's own (a program that
chose the tests' next random numbers would choose their inputs).
"""

from __future__ import annotations

import os
import sys
from typing import Any

State = dict[str, Any]  # "recursion": the limit; "random": random.getstate()


class Sent:
    """In the checker, for one run: the state as the run began, and as it was last sent to the program."""

    def __init__(self) -> None:
        import random

        # Seeded afresh, as a new process's is: so that any seed the tests set (before their first call too) is a
        # change of its state, whatever an earlier run of the same judge left it at.
        random.seed()
        self.random = True  # whether the tests use random (its state is read at each call only then)
        self.last: State = _now(True)
        self.environ = self.last["environ"]  # as the run began: what goes is the tests' change to it, no more

    def changed(self) -> State:
        """What of the state the tests changed since it was last sent (or the run began): to send with a call."""
        now = _now(self.random)
        changed = {key: value for key, value in now.items() if self.last.get(key) != value}
        self.last.update(changed)
        if "environ" in changed:
            environ, base = _decoded(changed["environ"]), _decoded(self.environ)
            changed["environ"] = [
                {k: v for k, v in environ.items() if base.get(k) != v},
                [k for k in base if k not in environ],
            ]
        return changed


def _now(random_too: bool) -> State:
    # The environment as bytes (``os.environ``'s own): copied in a fraction of a microsecond, decoded only when changed.
    environ = dict(getattr(os.environ, "_data", os.environ))
    state: State = {"recursion": sys.getrecursionlimit(), "environ": environ, "argv": list(sys.argv)}
    try:
        state["cwd"] = os.getcwd()
    except OSError:
        pass
    random = sys.modules.get("random") if random_too else None
    if random is not None:
        state["random"] = random.getstate()
    return state


def _decoded(environ: dict[Any, Any]) -> dict[str, str]:
    return {os.fsdecode(k): os.fsdecode(v) for k, v in environ.items()}


def take(state: object) -> None:
    """In the program's process, before a call: the state the tests changed."""
    if not isinstance(state, dict):
        return
    limit = state.get("recursion")
    if type(limit) is int and limit > 0:
        sys.setrecursionlimit(limit)
    if "random" in state:
        import random  # the program's own, as the tests' is theirs

        random.setstate(state["random"])
    if "environ" in state:
        _environ(*state["environ"])
    if "argv" in state:
        sys.argv = [str(a) for a in state["argv"]]
    if "cwd" in state:
        try:
            os.chdir(state["cwd"])
        except OSError:
            pass


_BASE: dict[str, str] = {}  # the program's environment before the tests' first change reached it


def _environ(given: dict[str, str], gone: list[str]) -> None:
    """The environment as the run's began, with the tests' change to it: what they set, less what they unset."""
    if not _BASE:
        _BASE.update(os.environ)
    wanted = {k: v for k, v in _BASE.items() if k not in gone}
    wanted.update(given)
    for key in [k for k in os.environ if k not in wanted]:
        del os.environ[key]
    os.environ.update({k: v for k, v in wanted.items() if os.environ.get(k) != v})
