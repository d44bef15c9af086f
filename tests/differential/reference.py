"""The plain reference: each test of an item in a fresh process of its own, with no sandbox and no harness tricks.

- stdin form: ``python3 main.py`` (or the language's own compiler, then the binary; ``node``; ``bash``) in a
  temporary directory, fed the case's stdin; passed when it exits 0 and its stdout equals the expected one
  apart from trailing newlines (the sandbox's default ``exact`` comparison);
- call form: a fresh interpreter imports the program as the module ``main`` (so ``__name__`` is ``"main"``,
  not ``"__main__"``), calls the function and compares the value (tuples as lists, floats within 1e-6, as
  the sandbox's call tests do);
- assert form: a fresh interpreter imports the program as a module and runs the task's ``check`` on its
  function, with the task's OWN helpers (the prompt's, not the program's redefinitions) in the check's scope.

A call or assert test passes only when the runner reaches its end and writes the pass file. The reference is
the truth for honest items; a hack that passes it is reported, not counted as the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .corpus import Item, call_cases, stdio_cases

TIMEOUT_S = 20.0  # only a hang reaches it: every program of the corpus ends; a loaded machine is slow
RUNTIME = Path(__file__).resolve().parents[2] / ".runtime" / "site-packages"  # numpy etc., as programs get
COMPILE = {
    "c": ["gcc", "-O2", "-std=gnu11", "main.c", "-o", "main", "-lm"],
    "cpp": ["g++", "-O2", "-std=gnu++17", "main.cpp", "-o", "main"],
}
SOURCE = {"python": "main.py", "c": "main.c", "cpp": "main.cpp", "nodejs": "main.js", "bash": "main.sh"}
RUN = {
    "python": [sys.executable, "main.py"],
    "c": ["./main"],
    "cpp": ["./main"],
    "nodejs": ["node", "main.js"],
    "bash": ["bash", "main.sh"],
}

# Runs beside the program (never as it): imports it, judges, and writes PASS only when everything passed.
RUNNER = r"""
import importlib, json, math, sys
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["dir"])
sys.argv = ["main.py"]

def same(got, want):
    if isinstance(got, tuple):
        got = list(got)
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
        except TypeError:
            return False
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same, got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    try:
        return bool(got == want)
    except Exception:
        return False

module = importlib.import_module("main")
function = getattr(module, spec["entry"])
if spec["kind"] == "call":
    ok = same(function(*spec["args"]), spec["expected"])
else:
    scope = {"__name__": "check"}
    exec(spec["helpers"], scope)
    exec(spec["check"], scope)
    scope["check"](function)
    ok = True
if ok:
    with open(spec["result"], "w") as f:
        f.write("PASS")
"""


@dataclass(frozen=True)
class Outcome:
    """The reference's judgement of one item: passed every test, or why not (the first failing test)."""

    passed: bool
    detail: str = ""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CODEGYM_"))}
    if RUNTIME.is_dir():
        env["PYTHONPATH"] = str(RUNTIME)
    return env


def _run(argv: list[str], cwd: str, stdin: str = "") -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            argv, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, env=_env(), errors="replace"
        )
    except subprocess.TimeoutExpired:
        return None


def _stdio(item: Item, cwd: str) -> Outcome:
    Path(cwd, SOURCE[item.language]).write_text(item.program)
    if item.language in COMPILE:
        built = _run(COMPILE[item.language], cwd)
        if built is None or built.returncode != 0:
            return Outcome(False, "does not compile")
    for i, (stdin, expected) in enumerate(stdio_cases(item.task)):
        done = _run(RUN[item.language], cwd, stdin)
        if done is None:
            return Outcome(False, f"test {i}: timed out")
        if done.returncode != 0:
            return Outcome(False, f"test {i}: exit {done.returncode}: {done.stderr[-200:]}")
        if done.stdout.rstrip("\n") != expected.rstrip("\n"):
            return Outcome(False, f"test {i}: printed {done.stdout[:80]!r}, not {expected[:80]!r}")
    return Outcome(True)


def _judged(item: Item, cwd: str, spec: Mapping[str, object], what: str) -> Outcome:
    result = Path(cwd, "..", f"{Path(cwd).name}.result").resolve()
    result.unlink(missing_ok=True)
    spec = {**spec, "dir": cwd, "entry": item.task.entry, "result": str(result)}
    done = _run([sys.executable, "-c", RUNNER, json.dumps(spec)], cwd)
    if done is not None and result.exists() and result.read_text() == "PASS":
        result.unlink()
        return Outcome(True)
    why = "timed out" if done is None else f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
    return Outcome(False, f"{what}: {why}")


def _function(item: Item, cwd: str) -> Outcome:
    Path(cwd, "main.py").write_text(item.program)
    if item.form == "assert":
        spec = {"kind": "assert", "helpers": item.task.helpers, "check": item.task.check_source()}
        return _judged(item, cwd, spec, "check")
    for i, (args, expected) in enumerate(call_cases(item.task)):
        outcome = _judged(item, cwd, {"kind": "call", "args": args, "expected": expected}, f"test {i}")
        if not outcome.passed:
            return outcome
    return Outcome(True)


def judge(item: Item) -> Outcome:
    """The reference's verdict on one item (each test in a fresh process)."""
    with tempfile.TemporaryDirectory(prefix="codegym-ref-", ignore_cleanup_errors=True) as root:
        cwd = os.path.join(root, "prog")
        os.mkdir(cwd)
        return _stdio(item, cwd) if item.form == "stdio" else _function(item, cwd)


def judge_all(items: list[Item] | tuple[Item, ...], workers: int | None = None) -> dict[str, Outcome]:
    """Every item's reference verdict, ``workers`` items at a time (default: one per CPU)."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        return dict(zip((i.id for i in items), pool.map(judge, items), strict=True))
