"""What a model reads after its program ran: test results and interpreter cells as text a programmer would read.

One formatter for every multi-turn front door (TRL's ``CodeEnvironment``, the evaluator's rounds of feedback,
the trainer's code-repair task), so that a model sees the same text wherever it trains or is evaluated:

- :func:`test_feedback`: a program's results on the tests it was shown: per test, passed or its verdict; for the
  first failure its input, the expected and the actual output; for a time-out, a crash or a compile error the
  reason in words and the tail of its error output, never a bare "no output".
- :func:`shown_tests`: the tests a model is shown with its task (the public ones), before it writes code.
- :func:`cell_feedback`: a cell of an interpreter session: what it printed, its value, its traceback, and its
  time-out or end said plainly.

Both keep to a budget of characters: each field is cut (the start of an output, the end of an error output,
where the error is) and the whole text too, with a note saying what was cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codegym_sandbox.models import ProgramOut, Test, TestOut
from codegym_sandbox.sessions.wire import CellResult
from codegym_sandbox.verdicts import Verdict

REASONS = {
    Verdict.WA: "wrong answer",
    Verdict.TLE: (
        "time limit exceeded: it ran past its time limit (an endless loop, a wait for input that never comes, "
        "or too slow an algorithm)"
    ),
    Verdict.MLE: "memory limit exceeded: it used more memory than it may",
    Verdict.RE: "runtime error: it crashed or exited with an error",
    Verdict.CE: "compile error: the program does not compile (or, in Python, does not parse)",
    Verdict.OLE: "output limit exceeded: it printed more than it may",
    Verdict.SE: "the sandbox failed to run it (not the program's fault)",
}

SANDBOX_FAILED = "The sandbox failed to run the tests; this says nothing about the program. Try again."


def cut(text: str, limit: int, *, tail: bool = False) -> str:
    """``text`` within ``limit`` characters: its start (its end with ``tail``), and how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 0)
    gone = len(text) - keep
    if tail:
        return f"[... {gone} characters cut]\n" + text[len(text) - keep :]
    return text[:keep] + f"\n[... {gone} characters cut]"


def _block(title: str, text: str, limit: int, *, tail: bool = False, empty: str = "(nothing)") -> str:
    body = cut(text, limit, tail=tail).rstrip("\n") if text else empty
    return f"{title}:\n{body}"


def _folded(verdicts: Sequence[Verdict | None]) -> list[str]:
    """One line per run of tests with the same outcome: "Tests 1-4: passed", "Test 5: WA (wrong answer)"."""
    lines: list[str] = []
    start = 0
    for i in range(1, len(verdicts) + 1):
        if i < len(verdicts) and verdicts[i] == verdicts[start]:
            continue
        v = verdicts[start]
        what = "passed" if v is Verdict.AC else "not run (stopped at a failure)" if v is None else f"{v} ({REASONS[v]})"
        name = f"Test {start + 1}" if i - start == 1 else f"Tests {start + 1}-{i}"
        lines.append(f"{name}: {what}")
        start = i
    return lines


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _failure(test: Test, result: TestOut, limit: int) -> list[str]:
    """The first failing test's input, what was expected, and what the program did."""
    parts: list[str] = []
    stdout = result.stdout
    if test.assert_code is not None:
        parts.append(_block("Test code", test.assert_code, limit))
    elif test.call is not None:
        args = ", ".join(_shown(a) for a in test.call)
        kwargs = ", ".join(f"{k}={_shown(v)}" for k, v in (test.kwargs or {}).items())
        parts.append(_block("Called with", ", ".join(p for p in (args, kwargs) if p) or "no arguments", limit))
        parts.append(_block("Expected return value", _shown(test.expected), limit))
        if result.verdict is Verdict.WA:
            # The checker prints the returned value last, after what the program printed (``call_test``).
            printed, _, returned = stdout.rstrip("\n").rpartition("\n")
            parts.append(_block("Returned", returned, limit))
            stdout = printed
    else:
        parts.append(_block("Input", test.stdin or "", limit, empty="(empty)"))
        parts.append(_block("Expected output", test.expected_stdout or "", limit, empty="(empty)"))
        empty = "(it printed nothing)" if result.verdict is Verdict.WA else "(nothing)"
        parts.append(_block("Actual output", stdout, limit, empty=empty))
        stdout = ""
    if stdout and test.expected_stdout is None:
        parts.append(_block("It printed", stdout, limit))
    if result.stderr.strip():
        parts.append(_block("Error output (its end)", result.stderr, limit, tail=True))
    elif result.verdict in (Verdict.RE, Verdict.TLE, Verdict.MLE, Verdict.OLE):
        parts.append("Error output: it wrote none before it ended.")
    return parts


def test_feedback(tests: Sequence[Test], out: ProgramOut | None, *, budget: int = 2000) -> str:
    """A program's results on ``tests`` (``out`` from ``/v1/evaluate``; None when the sandbox failed) as text.

    Per test: passed, or its verdict and why; then the first failing test: its input (stdin, arguments, or
    assert code), the expected and actual output, and the end of its error output. Within ``budget`` characters.

    >>> from codegym_sandbox.models import TestOut
    >>> t = Test(stdin="1 2\\n", expected_stdout="3\\n")
    >>> ok = TestOut(verdict=Verdict.AC, wall_s=0.01, cpu_s=0.01, stdout="3\\n", stderr="")
    >>> print(test_feedback([t], ProgramOut(verdict="AC", passed=1, total=1, stopped_early=False, compile=None,
    ...                                     tests=[ok])))
    All 1 tests passed.
    Test 1: passed
    """
    if out is None or out.verdict is Verdict.SE or any(t.verdict is Verdict.SE for t in out.tests):
        return SANDBOX_FAILED
    limit = max(budget // 6, 60)
    total = out.total or len(tests)
    if out.verdict is Verdict.CE:
        # The program never ran: one reason for all its tests.
        stderr = next((t.stderr for t in out.tests if t.stderr.strip()), "")
        if not stderr and out.compile is not None:
            stderr = out.compile.stderr
        text = f"0 of {total} tests passed: {REASONS[Verdict.CE]}.\n" + _block(
            "Compiler output (its end)", stderr, limit * 2, tail=True, empty="(the compiler said nothing)"
        )
        return cut(text, budget)
    verdicts: list[Verdict | None] = [t.verdict for t in out.tests] + [None] * max(total - len(out.tests), 0)
    head = f"All {total} tests passed." if out.passed == total else f"{out.passed} of {total} tests passed."
    lines = [head, *_folded(verdicts[:total])]
    first = next((i for i, t in enumerate(out.tests) if t.verdict is not Verdict.AC), None)
    if first is not None and first < len(tests):
        result = out.tests[first]
        lines.append("")
        lines.append(f"First failure, test {first + 1}: {REASONS[result.verdict]}.")
        lines += _failure(tests[first], result, limit)
    return cut("\n".join(lines), budget)


def shown_tests(tests: Sequence[Test], *, function: str | None = None, budget: int = 2000) -> str:
    """The tests a model is shown before it writes its program: each one's input and expected output (a call
    as ``function(arguments) == expected``, an assert test as its code), within ``budget`` characters."""
    limit = max(budget // max(2 * len(tests), 1), 60)
    parts: list[str] = []
    for i, test in enumerate(tests, 1):
        if test.assert_code is not None:
            parts.append(f"Test {i}:\n{cut(test.assert_code, limit).rstrip()}")
        elif test.call is not None:
            args = [_shown(a) for a in test.call] + [f"{k}={_shown(v)}" for k, v in (test.kwargs or {}).items()]
            call = f"{function or 'f'}({', '.join(args)}) == {_shown(test.expected)}"
            parts.append(f"Test {i}: {cut(call, limit * 2)}")
        else:
            parts.append(
                f"Test {i}\n"
                + _block("Input", test.stdin or "", limit, empty="(empty)")
                + "\n"
                + _block("Expected output", test.expected_stdout or "", limit, empty="(empty)")
            )
    return cut("\n\n".join(parts), budget)


NOT_TEXT = "Your code holds characters that are not text (a lone surrogate such as \\ud800): nothing was run or kept."


def not_text(code: str) -> str | None:
    """Why ``code``, a tool call's argument, cannot be run or kept (None when it can): a JSON argument may
    carry lone surrogates, which no UTF-8 request body can hold. Refused where the model gave it, so that it
    never reaches a reward's request (where it would fail as the sandbox's failure, which is masked)."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:
        return NOT_TEXT
    return None


def ended_while_running(detail: str) -> str:
    """What a call whose interpreter ended while its code ran is told (the sandbox's 410 with ``ran``): the code
    ran, and is not run again in a fresh interpreter, where it would be run twice (files it appended to, a
    random draw taken again) and read as though it had run once."""
    return (
        f"[The code ran, but its interpreter ended before it answered ({detail}): its output is lost, and so are "
        "its variables; the next call starts a fresh interpreter.]"
    )


def cell_feedback(cell: CellResult, *, budget: int = 2000) -> str:
    """A session cell's result as text: its output, its value, its traceback, and how it ended when it did
    not finish, within ``budget`` characters."""
    limit = max(budget // 3, 60)
    parts: list[str] = []
    if cell.stdout:
        parts.append(cut(cell.stdout, limit).rstrip("\n"))
    if cell.stderr:
        parts.append(_block("stderr", cell.stderr, limit, tail=True))
    if cell.display is not None:
        parts.append(cut(cell.display, limit))
    if cell.output_truncated:
        parts.append("[its output went past the sandbox's limit and was cut]")
    if cell.status == "time_limit":
        parts.append(f"Time limit: the cell ran past its time limit and was stopped after {cell.execution_time:.1f} s.")
    elif cell.status == "memory_limit":
        parts.append("Memory limit: the session used more memory than it may, and ended.")
    elif cell.status == "killed":
        parts.append("The interpreter ended (it exited or was killed).")
    if cell.error is not None and cell.status == "finished":
        parts.append(cut("".join(cell.error.traceback) or f"{cell.error.type}: {cell.error.message}", limit, tail=True))
    if not cell.alive:
        parts.append("The session ended: its variables are gone; the next call starts a fresh interpreter.")
    return cut("\n".join(p for p in parts if p) or "(the cell printed nothing and has no value)", budget)
