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
    stdin, nonce = harness.assert_stdin(code)
    return harness.assert_passed(_python(harness.assert_runner(checks), stdin.decode()).encode(), nonce)


def test_assert_passes_only_with_the_nonce_last() -> None:
    assert _assert_run("def f(x):\n    return x + 1", "assert f(1) == 2")
    assert not _assert_run("def f(x):\n    return x", "assert f(1) == 2")


def test_early_exit_does_not_pass() -> None:
    assert not _assert_run("import sys\nsys.exit(0)", "assert False")


def test_the_program_reads_end_of_file_and_its_source_arrives_intact() -> None:
    code = "import sys\ns = 'a\\r\\nb \u00e9'\nprint(repr(sys.stdin.read()))\n"
    stdin, nonce = harness.assert_stdin(code)
    out = _python(harness.assert_runner("assert s == 'a\\r\\nb \u00e9'"), stdin.decode())
    assert out.splitlines() == ["''", "", nonce], out


def test_nonces_differ() -> None:
    assert harness.assert_stdin("")[1] != harness.assert_stdin("")[1]
    assert not harness.assert_passed(b"abc\n", "abd")
