"""TRL's code environment keeps the reward honest against what the model writes through its tools: on every backend.

``CodeEnvironment`` gives the model an interpreter session (``run_python``) and the public tests
(``run_tests``); the reward judges the answer on all the tests, hidden ones included, through ``/v1/evaluate``.
Nothing a cell does may read the hidden tests (not in its files, its environment, nor another process's), change
the reward (files it writes, builtins it patches), or reach another rollout's session.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from codegym_evaluator.trl_env import CodeEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import ServerProcess

HIDDEN = f"hidden-{secrets.token_hex(12)}"  # the expected output of the hidden test: no cell may find it
CASES = [{"input": "public\n", "output": "shown\n"}, {"input": "hidden\n", "output": f"{HIDDEN}\n"}]
ROW = {"verification_info": {"language": "python", "test_cases": CASES}}
RIGHT = f"print({{'public': 'shown', 'hidden': {HIDDEN!r}}}[input()])\n"
SLOW_RIGHT = "import time\ntime.sleep(1.5)\n" + RIGHT  # judged while a cell searches
WRONG = "print('shown')\n"

# Looks for a marker in every file it can read (and every process's command line and environment), its own
# environment and the interpreter's memory it can reach; it finds a canary of its own first, so that a search
# that cannot look is no pass.
SEARCH = """
import os, stat, time
def search(marker, budget_s=6.0):
    hits, seen, deadline = [], set(), time.monotonic() + budget_s
    needle = marker.encode()
    if any(marker in v for v in os.environ.values()):
        hits.append('environ')
    # where a run's data could be: processes, scratch and temporary places, then the rest while time lasts
    roots = ['/proc', '/tmp', '/dev/shm', '/var/tmp', '/run', os.getcwd(), os.path.expanduser('~'), '/']
    for top in roots:
        for root, dirs, files in os.walk(top, followlinks=False):
            if root in seen or root.startswith(('/sys', '/proc/sys', '/dev/')) and root != '/dev/shm':
                dirs[:] = []
                continue
            seen.add(root)
            if root == '/proc':
                dirs[:] = [d for d in dirs if d.isdigit() or d == 'self']
            elif root.startswith('/proc/'):
                dirs[:] = []
                files = [f for f in files if f in ('cmdline', 'environ')]
            for name in files:
                if time.monotonic() > deadline:
                    return hits
                path = os.path.join(root, name)
                try:
                    if os.path.islink(path) or not stat.S_ISREG(os.stat(path).st_mode):
                        continue
                    with open(path, 'rb') as f:
                        if needle in f.read(1 << 20):
                            hits.append(path)
                except (OSError, MemoryError):
                    pass
    return hits
"""


KILL_ALL = (
    "import os\nfor pid in range(2, 1 << 15):\n    try:\n        os.kill(pid, 9)\n    except OSError:\n        pass\n"
)


@pytest.fixture(scope="module")
def url(backend: str) -> Iterator[str]:
    env = {
        "CODEGYM_SANDBOX_BACKEND": backend,
        "CODEGYM_SANDBOX_WORKERS": "2",
        "CODEGYM_SANDBOX_CACHE_ENTRIES": "0",
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


def env_on(url: str, partial: bool = True) -> CodeEnvironment:
    env = CodeEnvironment(url, public_tests=1, cell_timeout_s=15.0, timeout_s=5.0, partial=partial)
    shown = env.reset(**ROW)
    assert shown is not None and "shown" in shown and HIDDEN not in shown
    return env


def test_no_cell_reads_the_hidden_tests(url: str) -> None:
    env = env_on(url)
    canary = f"canary-{secrets.token_hex(8)}"

    async def rollout() -> tuple[float | None, str]:
        await env.run_python(SEARCH)
        assert "Error" not in await env.run_python(f"open('own-canary', 'w').write({canary!r})")  # in its own directory
        await env.submit(SLOW_RIGHT)
        # the cell searches while the hidden tests are being judged
        cell = env.run_python(f"time.sleep(0.5)\nprint(search({canary!r}))\nprint(search({HIDDEN!r}))")
        return await asyncio.gather(env.get_reward(), cell)

    reward, found = asyncio.run(rollout())
    assert reward == 1.0
    own, hidden = found.splitlines()
    assert "own-canary" in own, found  # the search could look
    assert hidden == "[]", found  # and found nothing of the hidden tests
    assert HIDDEN not in asyncio.run(env.run_tests(WRONG))  # nor does the public tests' feedback show them


def test_no_hidden_assert_of_a_one_check_task_reaches_the_model(url: str) -> None:
    # HumanEval's shape: one test, `check`, holding every assert; the model is shown its first, and a program
    # that answers exactly what it was shown (a table made from the prompt) must not be paid for the rest.
    hidden = [(x, secrets.randbelow(10**9)) for x in (10, 77)]
    check = "def check(candidate):\n" + "".join(f"    assert candidate({x}) == {y}\n" for x, y in [(1, 2), *hidden])
    row = {"prompt": "def f(x):\n    pass\n", "tests": check, "entry_point": "f"}
    env = CodeEnvironment(url, public_tests=1, timeout_s=5.0)
    shown = env.reset(**row)
    assert shown is not None and "candidate(1) == 2" in shown
    assert not any(str(y) in shown for _, y in hidden), shown
    seen = dict(re.findall(r"candidate\((\d+)\) == (\d+)", shown))
    fitted = f"def f(x):\n    return {{{', '.join(f'{k}: {v}' for k, v in seen.items())}}}.get(x, 0)\n"

    async def rollout() -> tuple[str, float | None]:
        return await env.run_tests(fitted), await env.get_reward()

    said, reward = asyncio.run(rollout())
    assert not any(str(y) in said for _, y in hidden), said  # nor does run_tests' feedback show or run them
    assert reward == 0.0


def test_no_cell_changes_the_reward(url: str) -> None:
    env = env_on(url, partial=False)  # WRONG passes the public test, not the hidden one
    tamper = (
        "import builtins, os, sys\n"
        "for d in ('/tmp', os.getcwd(), os.path.expanduser('~')):\n"
        "    for name in ('sitecustomize.py', 'usercustomize.py', 'main.py', 'program.py'):\n"
        "        try:\n"
        f"            open(os.path.join(d, name), 'w').write('print({HIDDEN!r})')\n"
        "        except OSError:\n"
        "            pass\n"
        "builtins.input = lambda *a: 'hidden'\n"
        f"builtins.print = lambda *a, **k: sys.stdout.write({HIDDEN!r} + chr(10))\n"
        "os.environ['PYTHONSTARTUP'] = '/tmp/main.py'\n"
        "sys.modules['__main__'].__dict__['__builtins__'] = builtins\n"
    )

    async def rollout(program: str) -> float | None:
        await env.run_python(tamper)
        await env.run_tests(program)
        return await env.get_reward()

    assert asyncio.run(rollout(WRONG)) == 0.0
    env.reset(**ROW)
    assert asyncio.run(rollout(RIGHT)) == 1.0


def test_no_cell_reaches_another_rollouts_session(url: str) -> None:
    mine, other = env_on(url), env_on(url)
    secret = f"secret-{secrets.token_hex(8)}"

    async def rollout() -> tuple[str, str, str]:
        await mine.run_python(f"secret = {secret!r}")
        await other.run_python(SEARCH)
        seen = await other.run_python(f"print(search({secret!r}, 4.0))")
        # signal everything it can, then ask for the other session's state by every name
        await other.run_python(KILL_ALL)
        asked = await other.run_python("secret")
        return seen, asked, await mine.run_python("secret")

    seen, asked, kept = asyncio.run(rollout())
    assert seen == "[]", seen
    assert "NameError" in asked or "fresh one" in asked, asked
    assert kept == repr(secret)


def test_no_tool_argument_turns_a_wrong_answer_into_the_sandboxs_failure(url: str) -> None:
    # A JSON tool argument may hold a lone surrogate, which no request body can carry: judged, it would fail as
    # the sandbox's failure, and a reward of None is masked (a wrong answer that escapes its 0).
    env = env_on(url, partial=False)

    async def rollout() -> tuple[list[str], float | None]:
        said = [await env.submit(WRONG + "# \ud800\n"), await env.run_tests("print('shown') # \udfff")]
        said.append(await env.run_python("x = '\ud800'"))
        return said, await env.get_reward()

    said, reward = asyncio.run(rollout())
    assert all("not text" in s for s in said), said
    assert reward == 0.0  # no answer was kept: the rollout gave none
    env.reset(**ROW)

    async def after_an_answer() -> float | None:
        await env.submit(RIGHT)
        await env.submit("\ud800")  # refused: the answer before stays the answer
        return await env.get_reward()

    assert asyncio.run(after_an_answer()) == 1.0
