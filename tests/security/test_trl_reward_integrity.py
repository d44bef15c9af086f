"""The TRL reward gives no pass to a program that ends the run before its assert tests: on every backend.

``CodeReward`` with ``api="fusion"`` asks the server whether it is codegym and then judges through the native
checker, where no exit of the program's is a pass; against another SandboxFusion server a pass needs the
run to print, after the asserts, a nonce made for that run. The plain server here is the suite's own server
reached only at ``/run_code`` and ``/v1/ping`` (everything else is 404), which runs a program as upstream does:
one ``python`` process, its exit status and its output.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from codegym_evaluator.trl_reward import CodeReward, UnverifiedServerWarning
from fastapi.testclient import TestClient

from .transports import forwarding

RIGHT = "def f(x):\n    return x * x + 1\n"
WRONG = "def f(x):\n    return 0\n"
CHECK = "def check(candidate):\n    assert candidate(2) == 5\n    assert candidate(3) == 10\n"
ASSERTS = ["assert f(2) == 5", "assert f(-1) == 2"]

# Each is a way to end the run, with status 0, before the asserts appended after the program fail.
EXITS = {
    "sys-exit-zero": "import sys\nsys.exit(0)\n",
    "os-exit-zero": "import os\nos._exit(0)\n",
    "raise-system-exit": "raise SystemExit\n",
    "atexit-hook-exits-zero": "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "excepthook-exits-zero": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
    "system-exit-in-a-thread": "import sys, threading\nt = threading.Thread(target=sys.exit, args=(0,))\n"
    "t.start()\nt.join()\n",
    "thread-exits-during-the-asserts": "import os, threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.05), os._exit(0)), daemon=True).start()\n"
    "def f(x):\n    time.sleep(0.2)\n    return 0\n",
    "exec-a-child": "import os, sys\nsys.stdout.flush()\nos.execv(sys.executable, [sys.executable, '-c', 'pass'])\n",
    "print-a-nonce-like-line": "import os, secrets\nprint('\\n' + secrets.token_hex(16), flush=True)\nos._exit(0)\n",
}
# Reads the nonce from its own file (the tests follow the program in it) and prints it when the tests call it
# (what runs at the top level a row's entry point has the sanitiser drop): only codegym stops it.
READS_ITS_SOURCE = (
    "def f(x):\n"
    "    import os, re, sys\n"
    "    text = open(os.path.abspath(sys.argv[0])).read()\n"
    "    found = re.findall(r'[0-9a-f]{32}', text)\n"
    "    if found:\n        print('\\n' + found[-1], flush=True)\n        os._exit(0)\n"
    "    return 0\n"
)


@pytest.fixture(scope="module")
def plain(hostile: TestClient) -> Iterator[CodeReward]:
    """The reward against a plain SandboxFusion server: it warns, once, that a pass there can be forged."""
    reward = CodeReward(
        "http://fusion", api="fusion", transport=forwarding(hostile, frozenset({"/run_code", "/v1/ping"}))
    )
    with pytest.warns(UnverifiedServerWarning, match="not a codegym sandbox"):
        assert rewards(reward, [RIGHT, WRONG]) == [1.0, 0.0]
    yield reward


def rewards(reward: CodeReward, programs: list[str]) -> list[float | None]:
    """Each program against both assert formats (HumanEval's check, MBPP's list): its reward for each."""
    completions = [f"```python\n{p}\n```" for p in programs]
    n = len(completions)
    humaneval = reward(completions=completions, tests=[CHECK] * n, entry_point=["f"] * n)
    mbpp = reward(completions=completions, test_list=[ASSERTS] * n)
    return [a if a == b else None for a, b in zip(humaneval, mbpp, strict=True)]  # None: they disagree


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_on_codegym_no_exit_and_no_source_reading_passes(hostile: TestClient, api: str) -> None:
    reward = CodeReward("http://codegym", api=api, transport=forwarding(hostile))  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a codegym server is found: no warning
        programs = [RIGHT, WRONG, READS_ITS_SOURCE, *(WRONG + e for e in EXITS.values())]
        got = rewards(reward, programs)
    assert got[:2] == [1.0, 0.0], got
    assert got[2:] == [0.0] * (len(EXITS) + 1), dict(zip(["reads-its-source", *EXITS], got[2:], strict=True))


@pytest.mark.parametrize("attack", sorted(EXITS))
def test_on_a_plain_server_no_exit_before_the_asserts_passes(plain: CodeReward, attack: str) -> None:
    # Before and after the wrong answer: some act at once, some when the asserts fail or call the program.
    got = rewards(plain, [EXITS[attack] + "\n" + WRONG, WRONG + "\n" + EXITS[attack]])
    assert got == [0.0, 0.0], (attack, got)


def test_a_plain_server_cannot_stop_a_program_that_reads_its_own_source(plain: CodeReward) -> None:
    # The limit the reward's docstring states: program and tests share one file and one interpreter there.
    assert rewards(plain, [READS_ITS_SOURCE]) == [1.0]
