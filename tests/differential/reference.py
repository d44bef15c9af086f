"""The plain reference: each test of an item in a fresh process of its own, with no sandbox and no harness tricks.

- stdin form: ``python3 main.py`` (or the language's own compiler, then the binary; ``node``; ``bash``) in a
  temporary directory, fed the case's stdin; passed when it exits 0 and its stdout is the expected one as
  the item's dataset's harness compares (``comparisons.HARNESSES``): apart from trailing newlines (codegym's
  default), token by token (open-r1; APPS with numbers as np.allclose takes them), line by line with tokens as
  decimals (LiveCodeBench), or as floats where a codegym task says so;
- call form: a fresh interpreter imports the program as the module ``main`` (so ``__name__`` is ``"main"``,
  not ``"__main__"``), calls the function and compares the value as the item's dataset does: JSON values
  (tuples as lists, a bool no number, an expected float within 1e-6, never through an overflow), Python's
  ``==`` (LiveCodeBench's harness), or APPS's ``testing_util`` (``==``, then a list of tuples as lists);
- assert form: a fresh interpreter imports the program as a module and runs the task's ``check`` on its
  function, with the task's OWN helpers (the prompt's, not the program's redefinitions) in the check's scope.

A call or assert test passes only when the runner reaches its end and writes the pass file. The reference is
the truth for honest items; a hack that passes it is reported, not counted as the truth.

A plain harness still keeps a hostile program from hurting the machine it runs on: each run is a session of its
own under a shell that stays its parent (a program that kills its parent or its process group ends its own
run, not the test), with its temporary directory and home in the item's own directory (what it plants there
goes with it), and the runner imports nothing from the program's directory but the program.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from .comparisons import HARNESSES
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
from fractions import Fraction
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["dir"])
sys.path.extend(spec["path"])
sys.argv = ["main.py"]

def close(got, want):
    # Exact fractions: no number beyond a float's range becomes infinity, and an infinity matches only itself.
    if math.isinf(want) or math.isnan(want) or (isinstance(got, float) and not math.isfinite(got)):
        return got == want
    a, b = Fraction(got), Fraction(want)
    return abs(a - b) <= max(Fraction(1e-6) * max(abs(a), abs(b)), Fraction(1e-6))

def plain(value):
    # What a numpy value stands for, and tuples as lists: then what JSON holds of it (TypeError: not JSON).
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value

def same(got, want):
    # JSON values: a bool is no number, an expected integer only that number, an expected float within 1e-6.
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float):
        return isinstance(got, (int, float)) and close(got, want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(same, got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want

def json_equal(got, want):
    try:
        got = json.loads(json.dumps(plain(got)))
    except (TypeError, ValueError):
        return False
    return same(got, want)

def python_equal(got, want):
    # What LiveCodeBench's harness does: a returned tuple as a list, then Python's ==.
    if isinstance(got, tuple):
        got = list(got)
    try:
        return bool(got == want)
    except Exception:
        return False

def apps_equal(got, want):
    # APPS's testing_util (call-based), but for its test against want[0], which a wrapped value does not need here.
    if isinstance(got, tuple):
        got = list(got)
    result = python_equal(got, want)
    try:
        if isinstance(got[0], tuple):
            result = result or ([list(x) for x in got] == want)
    except Exception:
        pass
    return result

module = importlib.import_module("main")
sys.path.remove(spec["dir"])  # the check imports what it imports from the library, not what the program wrote
function = getattr(module, spec["entry"])
if spec["kind"] == "call":
    compare = {"python": python_equal, "apps": apps_equal}.get(spec["rule"], json_equal)
    ok = compare(function(*spec["args"]), spec["expected"])
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


def _env(cwd: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CODEGYM_", "TMP", "TEMP"))}
    if RUNTIME.is_dir():
        env["PYTHONPATH"] = str(RUNTIME)
    home = str(Path(cwd).parent)  # the item's own directory: its temporary files and home go with it
    env.update(TMPDIR=home, HOME=home)
    return env


# The program's parent: a shell that waits for it (a program that kills its parent kills this shell).
SHIM = ["sh", "-c", '"$@"; exit $?', "sh"]


def timeout_of(item: Item) -> float:
    """How long the reference lets a run of ``item`` take: the item's own limit with room for a loaded machine
    (its programs are meant far from it, either side), else ``TIMEOUT_S``."""
    return 1.5 * item.timeout_s if item.timeout_s else TIMEOUT_S


def _run(
    argv: list[str], cwd: str, stdin: str = "", timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str] | None:
    with subprocess.Popen(
        [*SHIM, *argv],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(cwd),
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            out = None
        finally:
            try:
                os.killpg(proc.pid, 9)  # what it left behind in its session
            except ProcessLookupError:
                pass
        if out is None:
            proc.communicate()
            return None
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _stdio(item: Item, cwd: str) -> Outcome:
    Path(cwd, SOURCE[item.language]).write_text(item.program)
    if item.language in COMPILE:
        built = _run(COMPILE[item.language], cwd)
        if built is None or built.returncode != 0:
            return Outcome(False, "does not compile")
    for i, (stdin, expected) in enumerate(stdio_cases(item.task)):
        done = _run(RUN[item.language], cwd, stdin, timeout_of(item))
        if done is None:
            return Outcome(False, f"test {i}: timed out")
        if done.returncode != 0:
            return Outcome(False, f"test {i}: exit {done.returncode}: {done.stderr[-200:]}")
        if not same_output(done.stdout, expected, item.comparison or HARNESSES[item.dataset][0]):
            return Outcome(False, f"test {i}: printed {done.stdout[:80]!r}, not {expected[:80]!r}")
    return Outcome(True)


def same_output(got: str, want: str, comparison: str) -> bool:
    """Whether the output ``got`` is the expected ``want``: ``exact`` apart from trailing newlines, ``whitespace``
    token by token, ``lcb`` as lcb_runner's ``grade_stdio``, ``float`` token by token with numbers as exact
    fractions (one written as an integer equal, others within 1e-6)."""
    if comparison == "exact":
        return got.rstrip("\n") == want.rstrip("\n")
    if comparison == "lcb":
        return _lcb_same(got, want)
    if comparison == "apps":
        return _apps_same(got, want)
    a, b = got.split(), want.split()
    if comparison == "whitespace" or len(a) != len(b):
        return a == b
    return all(x == y or _close_tokens(x, y) for x, y in zip(a, b, strict=True))


def _lcb_same(got: str, want: str) -> bool:
    """lcb_runner's ``grade_stdio``: the stripped outputs' lines, stripped, as many and each equal as text or as
    a line of ``Decimal`` tokens (a NaN equals nothing)."""
    a, b = ([line.strip() for line in text.strip().split("\n")] for text in (got, want))
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        try:
            if [Decimal(t) for t in x.split()] != [Decimal(t) for t in y.split()]:
                return False
        except InvalidOperation:
            return False
    return True


def _apps_same(got: str, want: str) -> bool:
    """APPS's ``testing_util`` on stdin (TACO's copy): the stripped lines' tokens equal as text, or all numbers,
    as many, within np.allclose's tolerances (``|a - b| <= 1e-8 + 1e-5 * |b|``), where an expected integer is
    only that integer (TACO's ``combined_int_check``; a tolerance that reaches one passes wrong programs)."""
    a, b = got.split(), want.split()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    try:
        pairs = [(Fraction(x), Fraction(y), y) for x, y in zip(a, b, strict=True)]
    except (ValueError, ZeroDivisionError):
        return False
    return all(
        x == y if re.fullmatch(r"[+-]?[0-9]+", text) else abs(x - y) <= Fraction(1e-8) + Fraction(1e-5) * abs(y)
        for x, y, text in pairs
    )


def _close_tokens(got: str, want: str) -> bool:
    try:
        x, y = Fraction(got), Fraction(want)
    except (ValueError, ZeroDivisionError):
        return False
    if re.fullmatch(r"[+-]?[0-9]+", want):
        return x == y
    return abs(x - y) <= max(Fraction(1e-6) * max(abs(x), abs(y)), Fraction(1e-6))


def _judged(item: Item, cwd: str, spec: Mapping[str, object], what: str) -> Outcome:
    result = Path(cwd, "..", f"{Path(cwd).name}.result").resolve()
    result.unlink(missing_ok=True)
    path = [str(RUNTIME)] if RUNTIME.is_dir() else []
    spec = {**spec, "dir": cwd, "entry": item.task.entry, "result": str(result), "path": path}
    # -I: no working directory, PYTHONPATH or user site on the runner's path (the runtime's packages by spec)
    done = _run([sys.executable, "-I", "-c", RUNNER, json.dumps(spec)], cwd, timeout=timeout_of(item))
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
        spec = {"kind": "call", "args": args, "expected": expected, "rule": HARNESSES[item.dataset][1]}
        outcome = _judged(item, cwd, spec, f"test {i}")
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
