"""What a program's own source or behaviour causes is never a sandbox error, on every backend.

A sandbox error (SE) is masked by every reward (TRL's gets ``None``): a program that could turn its failure
into one would escape the penalty of a wrong answer. So a program that compiles to nothing the kernel will
execute (a library: Rust's ``#![crate_type = "lib"]``, Go's ``package notmain``), has no entry point, or
breaks its interpreter's last steps gets CE or RE, as the same program would on its own. The sandbox's own
failures stay SE: a language whose toolchain is not installed here says so (and these tests then check
that answer instead); a tool that cannot start, or a worker killed from outside, is in ``test_faults.py``
and ``services/sandbox/tests/test_executor.py``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.trl_reward import CodeReward
from codegym_sandbox.languages import FUSION_LANGUAGES
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import ServerProcess  # the real-server helper of the load and fault tests

CE = frozenset({"CE"})
RE = frozenset({"RE"})
AC = frozenset({"AC"})
LIMITS = {"timeout_s": 3, "compile_timeout_s": 30}  # a language's first compile reads its toolchain from a cold disk
# Where the toolchain is not installed here to pin the answer down, any of the program's own failures.
OWN_FAILURE = frozenset({"CE", "RE"})
# scalac and kotlinc take two seconds of a JVM's CPU at best: on a busy machine the compile runs out of time.
SLOW_COMPILE = OWN_FAILURE | {"TLE"}


@dataclass(frozen=True)
class Unrunnable:
    """A program whose failure is its own, and the verdicts it may get."""

    id: str
    language: str
    code: str
    verdicts: frozenset[str]
    stderr: str = ""  # when set, what the step that failed says (the compile's or the run's stderr)


RUST_MAIN = 'fn main() { println!("42"); }\n'
# A Java program whose 4500 classes, nested in three classes of long names, get file names of 241 bytes: more
# than the frame header that starts a run can list (the agent refused it and died: SE, a worker lost).
_LONG = "".join(f"static class {c * 75}{{" for c in "ABC")
MANY_CLASSES = (
    f"public class Main {{ {_LONG}{''.join(f'static class L{i} {{}}' for i in range(4500))}}}}}}}"
    ' public static void main(String[] a) { System.out.println("42"); } }\n'
)
PRINTS_SYNTAX_ERROR = "import sys\nsys.stderr.write('  File \"main.py\", line 1\\nSyntaxError: x\\n')\nsys.exit(1)\n"
PROGRAMS = [
    # -- compiled to a library, not a program: the compiler succeeds, and its output cannot be executed --------
    Unrunnable("rust-lib", "rust", f'#![crate_type = "lib"]\npub {RUST_MAIN}', CE, "not executable"),
    Unrunnable("rust-rlib", "rust", f'#![crate_type = "rlib"]\npub {RUST_MAIN}', CE, "not executable"),
    Unrunnable("rust-staticlib", "rust", f'#![crate_type = "staticlib"]\npub {RUST_MAIN}', CE),
    # A shared object is marked executable: the kernel starts it, and it crashes at once.
    Unrunnable("rust-cdylib", "rust", f'#![crate_type = "cdylib"]\npub {RUST_MAIN}', RE),
    Unrunnable("rust-dylib", "rust", f'#![crate_type = "dylib"]\npub {RUST_MAIN}', RE),
    Unrunnable("rust-proc-macro", "rust", f'#![crate_type = "proc-macro"]\npub {RUST_MAIN}', OWN_FAILURE),
    Unrunnable("go-package-notmain", "go", "package notmain\n\nfunc Main() {}\n", OWN_FAILURE),
    Unrunnable("java-too-many-class-files", "java", MANY_CLASSES, frozenset({"CE", "TLE"})),  # TLE: a slow javac
    # -- no entry point ---------------------------------------------------------------------------------------
    Unrunnable("rust-no-main", "rust", "#![no_main]\nfn helper() {}\n", CE),
    Unrunnable("c-no-main", "c", "int solve(void) { return 42; }\n", CE),
    Unrunnable("cpp-no-main", "cpp", "int solve() { return 42; }\n", CE),
    Unrunnable("c-main-is-data", "c", "const int main = 0xc3;\n", RE),  # not in an executable segment
    Unrunnable("go-no-main", "go", "package main\n\nfunc solve() {}\n", CE),
    Unrunnable("java-no-main-method", "java", "public class Main { static int solve() { return 42; } }\n", RE),
    Unrunnable("java-other-class", "java", "class Solution { public static void main(String[] a) { } }\n", RE, "Main"),
    Unrunnable("java-public-class-mismatch", "java", "public class Solution { }\n", CE),
    Unrunnable("csharp-no-main", "csharp", "class Solution { static int Solve() { return 42; } }\n", CE),
    Unrunnable("kotlin-no-main", "kotlin", "fun solve(): Int = 42\n", SLOW_COMPILE),
    Unrunnable("scala-no-main", "scala", "object Solution { def solve: Int = 42 }\n", SLOW_COMPILE),
    Unrunnable("d-no-main", "D_ut", "int solve() { return 42; }\n", CE),
    # -- an interpreter whose last steps the program breaks --------------------------------------------------
    Unrunnable("python-no-excepthook", "python", "import sys\nsys.excepthook = None\nraise ValueError\n", RE),
    Unrunnable(
        "python-excepthook-raises", "python", "import sys\nsys.excepthook = lambda *a: 1 / 0\nraise ValueError\n", RE
    ),
    Unrunnable("python-closes-every-fd", "python", "import os\nos.closerange(0, 1 << 10)\nraise ValueError\n", RE),
    # -- what a Python program prints is no verdict: its source is compiled to say CE ---------------------------
    Unrunnable("python-bad-line-names-memory", "python", "x = = 1  # MemoryError\n", CE, "SyntaxError"),
    Unrunnable("bash-exec-missing", "bash", "exec /nonexistent/program\n", RE),
    Unrunnable("bash-exec-itself", "bash", "exec ./main.sh\n", RE),  # not executable: the shell's 126
]


def _missing(client: TestClient, language: str) -> str | None:
    """The first tool this server lacks for ``language``, or None when it can run it."""
    entry = {e["name"]: e for e in client.get("/v1/languages").json()}[language]
    return None if entry["available"] else str(entry["detail"]).removeprefix("missing: ").split(", ")[0]


def _failed_step(body: dict[str, Any]) -> dict[str, Any]:
    compiled = body["compile"]
    step: dict[str, Any] = compiled if compiled is not None and compiled["verdict"] != "AC" else body["run"]
    return step


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_a_program_that_cannot_run_earns_its_failure(hostile: TestClient, program: Unrunnable) -> None:
    body = {"language": program.language, "code": program.code, "limits": LIMITS}
    out = hostile.post("/v1/execute", json=body).json()
    missing = _missing(hostile, program.language)
    if missing is not None:
        # The server's own failure, which names what it lacks: the one SE here.
        assert out["verdict"] == "SE" and missing in out["run"]["error"], out
        return
    assert out["verdict"] in program.verdicts, f"{program.id}: {out}"
    step = _failed_step(out)
    assert step["error"] is None, out  # nothing of the sandbox's failed
    assert program.stderr in step["stderr"], out
    # The same program as a candidate of /v1/evaluate (a GRPO group's request) and through /run_code.
    tests = [{"stdin": "", "expected_stdout": "42\n"}] * 2
    group = {"language": program.language, "programs": [program.code], "tests": tests, "limits": body["limits"]}
    judged = hostile.post("/v1/evaluate", json=group).json()["results"][0]
    assert judged["verdict"] in program.verdicts and {t["verdict"] for t in judged["tests"]} <= program.verdicts
    if program.language in FUSION_LANGUAGES:
        fusion = hostile.post("/run_code", json={"language": program.language, "code": program.code}).json()
        assert fusion["status"] == "Failed", fusion  # not SandboxError, nor Success for a compile that made nothing


def test_a_run_on_its_own_is_a_compile_error_only_where_its_source_does_not_compile(hostile: TestClient) -> None:
    """The run's process says so before any of the program runs: what the program prints never does (under the
    execution reward a compile error earns -0.5, a runtime error -1.0)."""
    for code, verdict in ((PRINTS_SYNTAX_ERROR, "RE"), ("x = = 1  # MemoryError\n", "CE")):
        out = hostile.post("/v1/execute", json={"language": "python", "code": code, "limits": LIMITS}).json()
        assert out["verdict"] == verdict and out["run"]["error"] is None, out
        fusion = hostile.post("/run_code", json={"language": "python", "code": code}).json()
        assert fusion["status"] == "Failed" and fusion["run_result"]["memory_exceeded"] is False, fusion


# In a test series (assert tests, and stdio tests of a Python program) CE is the series' own compile's word (the
# series' process's, or the assert checker's), never Python's last line: the tests' SyntaxError (ast.parse of what
# the program returned) or the program's own (a parser that raises one) is RE, whatever the number of tests.
EVAL_INPUT = "print(eval(input()))\n"
SERIES = {
    "printed": (PRINTS_SYNTAX_ERROR, [{"stdin": "", "expected_stdout": "42\n"}] * 3, ["RE"] * 3),
    "bad-line-stdin": ("x = = 1  # MemoryError\n", [{"stdin": "", "expected_stdout": "42\n"}] * 3, ["CE"] * 3),
    "bad-line-asserts": ("x = = 1  # MemoryError\n", [{"assert_code": "assert 1"}] * 2, ["CE"] * 2),
    "eval-of-input": (
        EVAL_INPUT,
        [{"stdin": s, "expected_stdout": "6\n"} for s in ("2*3", "1+", "2*3")],
        ["AC", "RE", "AC"],
    ),
    "tests-parse-output": (
        "def expr(xs):\n    return '+'.join(map(str, xs))\n",
        [
            {"assert_code": "import ast\nast.parse(expr([]), mode='eval')\n"},
            {"assert_code": "assert eval(expr([1, 2])) == 3\n"},
        ],
        ["RE", "AC"],
    ),
    "byte-order-mark": ("\ufeffdef f(x):\n    return x\n", [{"assert_code": "assert f(1) == 1\n"}] * 2, ["AC"] * 2),
    "unknown-encoding": (
        "# coding: foobar\ndef f(x):\n    return x\n",
        [{"assert_code": "assert 1\n"}] * 2,
        ["CE"] * 2,
    ),
    "raises-syntax-error": (
        "def f(x):\n    raise SyntaxError('bad token')\n",
        [{"assert_code": "assert f(1) == 1\n"}, {"assert_code": "assert 1 == 1\n"}],
        ["RE", "AC"],
    ),
}


@pytest.mark.parametrize("case", sorted(SERIES))
def test_a_test_series_is_a_compile_error_only_where_its_source_does_not_compile(
    hostile: TestClient, case: str
) -> None:
    code, tests, verdicts = SERIES[case]
    # Two programs: assert tests run as a series of both; and each alone.
    for programs in ([code, code], [code]):
        group = {"language": "python", "programs": programs, "tests": tests, "limits": LIMITS, "cache": False}
        for judged in hostile.post("/v1/evaluate", json=group).json()["results"]:
            assert [t["verdict"] for t in judged["tests"]] == verdicts, (case, judged)


def test_a_right_program_of_the_same_languages_still_passes(hostile: TestClient) -> None:
    """The checks above judge the program: the same languages' entry points run (where installed here)."""
    right = {
        "rust": RUST_MAIN,
        "c": '#include <stdio.h>\nint main(void) { puts("42"); }\n',
        "java": 'public class Main { public static void main(String[] a) { System.out.println("42"); } }\n',
        "python": "print(42)\n",
    }
    for language, code in right.items():
        out = hostile.post("/v1/execute", json={"language": language, "code": code, "limits": LIMITS}).json()
        if _missing(hostile, language) is None:
            assert out["verdict"] == "AC" and out["run"]["stdout"] == "42\n", out


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_the_trl_reward_penalises_a_program_that_compiles_to_a_library(api: str) -> None:
    """TRL's reward scores such a program as the wrong program it is (0.0), never masks it (None), through
    both APIs of a real server (the local backend)."""
    server = ServerProcess({"CODEGYM_SANDBOX_BACKEND": "local"}, ["--workers", "1", "--log-level", "warning"])
    server.start()
    try:
        reward = CodeReward(server.url, api=api, timeout_s=8)  # type: ignore[arg-type]
        programs = [RUST_MAIN, *(f'#![crate_type = "{kind}"]\npub {RUST_MAIN}' for kind in ("lib", "cdylib"))]
        info = {"language": "rust", "test_cases": [{"input": "", "output": "42\n", "type": "stdin_stdout"}]}
        got = reward(completions=[f"```rust\n{p}```" for p in programs], verification_info=[info] * len(programs))
        rust = next(e for e in httpx.get(f"{server.url}/v1/languages").json() if e["name"] == "rust")
    finally:
        server.stop()
    # Without rustc the sandbox cannot judge Rust at all: its failure, masked for every program alike.
    assert got == ([1.0, 0.0, 0.0] if rust["available"] else [None, None, None])
