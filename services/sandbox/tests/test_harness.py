"""The Python harnesses of call and assert tests, without a sandbox."""

from __future__ import annotations

import subprocess
import sys

import pytest
from codegym_sandbox import harness


def _python(program: str, stdin: str = "") -> str:
    return subprocess.run(
        [sys.executable, "-c", program], input=stdin, capture_output=True, text=True, timeout=30
    ).stdout


def test_call_prints_only_the_json_result() -> None:
    program = harness.call_program("def f(a, b=0):\n    print('noise')\n    return [a, b]", "f", [1], {"b": 2})
    ok, value = harness.call_result(_python(program).encode())
    assert ok and value == [1, 2]


def test_call_needs_an_identifier() -> None:
    with pytest.raises(ValueError, match="identifier"):
        harness.call_program("", "f(); import os", [], None)


def test_call_result_of_garbage() -> None:
    assert harness.call_result(b"not json") == (False, None)


def _assert_run(code: str, checks: str) -> bool:
    stdin, nonce = harness.assert_stdin(code, checks)
    return harness.assert_passed(_python(harness.ASSERT_RUNNER, stdin.decode()).encode(), nonce)


def test_assert_passes_only_with_the_nonce_last() -> None:
    assert _assert_run("def f(x):\n    return x + 1", "assert f(1) == 2")
    assert not _assert_run("def f(x):\n    return x", "assert f(1) == 2")


def test_early_exit_does_not_pass() -> None:
    assert not _assert_run("import sys\nsys.exit(0)", "assert False")


def test_the_program_reads_end_of_file_and_its_source_arrives_intact() -> None:
    code = "import sys\ns = 'a\\r\\nb \u00e9'\nprint(repr(sys.stdin.read()))\n"
    # Tests with non-ASCII text, lines that look like a length, and no final newline: they end where they end.
    checks = "t = '\u00e9\\n12\\n'\nassert s == 'a\\r\\nb \u00e9' and len(t) == 5"
    stdin, nonce = harness.assert_stdin(code, checks)
    out = _python(harness.ASSERT_RUNNER, stdin.decode())
    assert out.splitlines() == ["''", "", nonce], out


def test_the_runner_is_one_file_for_every_task() -> None:
    assert _assert_run("def f(x):\n    return x * 2", "assert f(2) == 4")
    assert _assert_run("def g():\n    return 'x'", "assert g() == 'x'")
    assert not _assert_run("def g():\n    return 'x'", "assert f(2) == 4")  # no f: the tests raise


def test_a_nonce_is_the_same_for_the_same_program_and_tests_only_within_one_server() -> None:
    # The same for the same program and tests (so that a result can be cached), different otherwise...
    nonce = harness.assert_stdin("x = 1", "assert x")[1]
    assert harness.assert_stdin("x = 1", "assert x")[1] == nonce
    assert len({nonce, harness.assert_stdin("x = 2", "assert x")[1], harness.assert_stdin("x = 1", "assert 1")[1],
                harness.assert_stdin("x = 1a", "ssert x")[1]}) == 4  # fmt: skip
    # ... and under a key of this process's own: no program can work it out from what it is given.
    script = "from codegym_sandbox import harness; print(harness.assert_stdin('x = 1', 'assert x')[1])"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert len(other) == len(nonce) and other != nonce
    assert not harness.assert_passed(b"abc\n", "abd")
