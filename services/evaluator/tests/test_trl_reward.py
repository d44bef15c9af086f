"""The TRL reward against a real sandbox server on loopback, through both APIs, with each dataset format."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from codegym_evaluator.trl_reward import AsyncCodeReward, CodeReward, row_tests

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too

RIGHT = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
HALF = "```python\na, b = map(int, input().split())\nprint(a + b if a == 1 else 0)\n```"
WRONG = "```python\nprint('nope')\n```"
CRASH = "```python\nraise SystemExit(1)\n```"
CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10"}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ServerProcess({"CODEGYM_SANDBOX_BACKEND": "local"}, ["--workers", "2", "--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


def open_r1_columns(n: int) -> dict[str, list[object]]:
    info = {"language": "python", "test_cases": [{**c, "type": "stdin_stdout"} for c in CASES]}
    return {"verification_info": [info] * n}


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_open_r1_rows_get_their_pass_rate(url: str, api: str) -> None:
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    completions = [RIGHT, HALF, WRONG, CRASH]
    assert reward(prompts=["p"] * 4, completions=completions, **open_r1_columns(4)) == [1.0, 0.5, 0.0, 0.0]
    strict = CodeReward(url, api=api, partial=False)  # type: ignore[arg-type]
    assert strict(completions=completions, **open_r1_columns(4)) == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_conversational_completions_and_the_async_form(url: str, api: str) -> None:
    reward = AsyncCodeReward(url, api=api)  # type: ignore[arg-type]
    completions = [[{"role": "assistant", "content": RIGHT}], [{"role": "assistant", "content": WRONG}]]
    assert asyncio.run(reward(prompts=None, completions=completions, **open_r1_columns(2))) == [1.0, 0.0]
    assert reward.__name__ == "code_reward"


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_apps_input_output_rows_stdin_and_calls(url: str, api: str) -> None:
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    stdin_row = json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})
    call_row = json.dumps({"fn_name": "add", "inputs": [[1, 2], [5, 5], [True, False]], "outputs": [[3], [10], [1]]})
    add = "```python\ndef add(a, b):\n    return a + b\n```"
    sub = "```python\ndef add(a, b):\n    return a - b\n```"
    got = reward(completions=[RIGHT, add, sub], input_output=[stdin_row, call_row, call_row])
    assert got == [1.0, 1.0, pytest.approx(1 / 3)]  # True - False == 1: the third call passes


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_mbpp_and_humaneval_style_assert_rows(url: str, api: str) -> None:
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    square = "```python\ndef square(x):\n    return x * x\n```"
    off = "```python\ndef square(x):\n    return x * x if x < 3 else 0\n```"
    mbpp = ["assert square(2) == 4", "assert square(3) == 9"]
    humaneval = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
    assert reward(completions=[square, off], test_list=[mbpp, mbpp]) == [1.0, 0.5]
    got = reward(completions=[square, off], tests=[humaneval, humaneval], entry_point=["square", "square"])
    assert got == [1.0, 0.0]


def test_a_server_that_does_not_answer_masks_the_rewards() -> None:
    reward = CodeReward("http://127.0.0.1:9", timeout_s=1)
    assert reward(completions=[RIGHT, WRONG], **open_r1_columns(2)) == [None, None]


def test_a_row_without_tests_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="has no tests: give it a verification_info"):
        row_tests({"prompt": ["x"]}, 0)
