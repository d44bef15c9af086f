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


def test_assert_passes_only_with_the_nonce_last() -> None:
    program, nonce = harness.assert_program("def f(x):\n    return x + 1", "assert f(1) == 2")
    assert harness.assert_passed(_python(program, nonce + "\n").encode(), nonce)
    bad, nonce2 = harness.assert_program("def f(x):\n    return x", "assert f(1) == 2")
    assert not harness.assert_passed(_python(bad, nonce2 + "\n").encode(), nonce2)


def test_early_exit_does_not_pass() -> None:
    program, nonce = harness.assert_program("import sys\nsys.exit(0)", "assert False")
    assert not harness.assert_passed(_python(program, nonce + "\n").encode(), nonce)


def test_nonces_differ() -> None:
    assert harness.assert_program("", "")[1] != harness.assert_program("", "")[1]
    assert not harness.assert_passed(b"abc\n", "abd")
