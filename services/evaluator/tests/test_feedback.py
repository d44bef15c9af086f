"""The feedback text a model reads: built from the sandbox's real answers, and within its budget."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from codegym_evaluator import feedback
from codegym_sandbox import models
from codegym_sandbox.client import AsyncSandboxClient
from codegym_sandbox.models import ProgramOut
from codegym_sandbox.sessions.wire import CellResult

pytestmark = pytest.mark.anyio

STDIO = [models.Test(stdin="1 2\n", expected_stdout="3\n"), models.Test(stdin="5 5\n", expected_stdout="10\n")]
CALLS = [models.Test(call=[1, 2], expected=3), models.Test(call=["a", "b"], expected="ab")]


async def judged(transport: httpx.ASGITransport, program: str, tests: list[models.Test], **extra: Any) -> ProgramOut:
    async with AsyncSandboxClient("http://sandbox", transport=transport) as client:
        body = {"language": "python", "programs": [program], "tests": [t.model_dump() for t in tests], **extra}
        return (await client.evaluate(body)).results[0]


async def test_a_right_program_passes_every_test(sandbox: httpx.ASGITransport) -> None:
    out = await judged(sandbox, "a, b = map(int, input().split())\nprint(a + b)\n", STDIO)
    assert feedback.test_feedback(STDIO, out) == "All 2 tests passed.\nTests 1-2: passed"


async def test_a_wrong_answer_shows_the_first_failure(sandbox: httpx.ASGITransport) -> None:
    out = await judged(sandbox, "a, b = map(int, input().split())\nprint(a * b if a == 5 else a + b)\n", STDIO)
    text = feedback.test_feedback(STDIO, out)
    assert text.splitlines()[:3] == ["1 of 2 tests passed.", "Test 1: passed", "Test 2: WA (wrong answer)"]
    assert "First failure, test 2: wrong answer." in text
    assert "Input:\n5 5\nExpected output:\n10\nActual output:\n25" in text


async def test_a_program_that_prints_nothing_is_said_so(sandbox: httpx.ASGITransport) -> None:
    text = feedback.test_feedback(STDIO, await judged(sandbox, "pass\n", STDIO, early_stop=True))
    assert "Test 1: WA (wrong answer)" in text
    assert "Test 2: not run (stopped at a failure)" in text
    assert "Actual output:\n(it printed nothing)" in text


async def test_a_crash_shows_its_traceback(sandbox: httpx.ASGITransport) -> None:
    text = feedback.test_feedback(STDIO, await judged(sandbox, "raise ValueError('boom: ' + input())\n", STDIO))
    assert "Tests 1-2: RE (runtime error" in text
    assert "Error output (its end):" in text and "ValueError: boom: 1 2" in text


async def test_a_time_out_says_why_in_words(sandbox: httpx.ASGITransport) -> None:
    out = await judged(sandbox, "while True:\n    pass\n", STDIO[:1], limits={"timeout_s": 0.5})
    text = feedback.test_feedback(STDIO[:1], out)
    assert "Test 1: TLE (time limit exceeded" in text
    assert "endless loop" in text and "Error output: it wrote none before it ended." in text
    assert "no output" not in text


async def test_a_syntax_error_shows_the_compiler_output(sandbox: httpx.ASGITransport) -> None:
    text = feedback.test_feedback(STDIO, await judged(sandbox, "print(1\n", STDIO))
    assert text.startswith("0 of 2 tests passed: compile error")
    assert "SyntaxError" in text


async def test_call_tests_show_the_arguments_and_the_returned_value(sandbox: httpx.ASGITransport) -> None:
    program = "def f(a, b):\n    print('debug')\n    return a + b if isinstance(a, int) else b + a\n"
    text = feedback.test_feedback(CALLS, await judged(sandbox, program, CALLS, function="f"))
    assert "Test 2: WA (wrong answer)" in text
    assert "Called with:\n'a', 'b'\nExpected return value:\n'ab'\nReturned:\n\"ba\"\nIt printed:\ndebug" in text


async def test_assert_tests_show_their_code_and_the_assertion(sandbox: httpx.ASGITransport) -> None:
    tests = [models.Test(assert_code="assert f(2) == 4")]
    text = feedback.test_feedback(tests, await judged(sandbox, "def f(x):\n    return x + 1\n", tests))
    assert "Test code:\nassert f(2) == 4" in text and "AssertionError" in text


def test_a_sandbox_failure_says_nothing_about_the_program() -> None:
    assert feedback.test_feedback(STDIO, None) == feedback.SANDBOX_FAILED
    se = ProgramOut.model_validate(
        {"verdict": "SE", "passed": 0, "total": 2, "stopped_early": False, "compile": None,
         "tests": [{"verdict": "SE", "wall_s": 0, "cpu_s": None, "stdout": "", "stderr": "worker lost"}]}
    )  # fmt: skip
    assert feedback.test_feedback(STDIO, se) == feedback.SANDBOX_FAILED


def test_long_fields_and_many_tests_keep_to_the_budget() -> None:
    tests = [models.Test(stdin="x" * 5000, expected_stdout="y" * 5000)] + STDIO * 50
    results = [{"verdict": "WA", "wall_s": 0, "cpu_s": 0, "stdout": "z" * 1024, "stderr": "e" * 1024}]
    results += [{"verdict": "AC", "wall_s": 0, "cpu_s": 0, "stdout": "", "stderr": ""}] * 100
    out = ProgramOut.model_validate(
        {"verdict": "WA", "passed": 100, "total": 101, "stopped_early": False, "compile": None, "tests": results}
    )
    text = feedback.test_feedback(tests, out, budget=600)
    assert len(text) <= 600
    assert text.splitlines()[:3] == ["100 of 101 tests passed.", "Test 1: WA (wrong answer)", "Tests 2-101: passed"]
    assert "characters cut]" in text and "Expected output:" in text


def cell(**fields: Any) -> CellResult:
    base = {"stdout": "", "stderr": "", "display": None, "error": None, "status": "finished", "execution_time": 0.1}
    return CellResult.model_validate({**base, "cpu_time": 0.1, "output_truncated": False, "alive": True, **fields})


def test_cells_show_output_value_traceback_and_time_outs() -> None:
    assert feedback.cell_feedback(cell(stdout="hi\n", display="2")) == "hi\n2"
    error = {"type": "ZeroDivisionError", "message": "division by zero", "traceback": ["Traceback\n", "ZeroDiv\n"]}
    assert feedback.cell_feedback(cell(error=error)) == "Traceback\nZeroDiv\n"
    assert "ran past its time limit" in feedback.cell_feedback(
        cell(status="time_limit", execution_time=2.0, error=error)
    )
    assert "session ended" in feedback.cell_feedback(cell(status="memory_limit", alive=False))
    assert feedback.cell_feedback(cell()) == "(the cell printed nothing and has no value)"
    assert len(feedback.cell_feedback(cell(stdout="a" * 10_000), budget=300)) <= 300
