"""TRL's multi-turn code environment (``codegym_evaluator.trl_env``) against a real sandbox on loopback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.trl_env import SANDBOX_FAILED, CodeEnvironment, code_environment

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from load_bench import ServerProcess, free_port  # the real-server helper the load and security tests use too

RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
PUBLIC_ONLY = "print({'1 2': 3, '5 5': 10}[input().strip()])\n"  # the shown answers, hard-coded
CASES = [{"input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in [(1, 2), (5, 5), (7, 8), (10, 20)]]
ROW = {"prompt": [{"role": "user", "content": "Add two numbers."}], "verification_info": {"test_cases": CASES}}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ServerProcess({"CODEGYM_SANDBOX_BACKEND": "local"}, ["--workers", "2", "--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


def session_status(url: str, session_id: str) -> int:
    return httpx.get(f"{url}/v1/sessions/{session_id}", timeout=10).status_code


def test_reset_shows_the_public_tests_only(url: str) -> None:
    shown = CodeEnvironment(url, public_tests=2).reset(**ROW)
    assert shown is not None and shown.startswith("\n\nPublic tests")
    assert "Input:\n1 2\nExpected output:\n3" in shown and "Input:\n5 5\nExpected output:\n10" in shown
    assert "7 8" not in shown and "15" not in shown and "30" not in shown
    assert CodeEnvironment(url, public_tests=0).reset(**ROW) is None
    # the rule every front door shares (Task.visible_tests): by default one test; never all, one stays hidden
    default = CodeEnvironment(url).reset(**ROW)
    assert default is not None and "Input:\n1 2" in default and "5 5" not in default
    every = CodeEnvironment(url, public_tests=9).reset(**ROW)
    assert every is not None and "Input:\n7 8" in every and "10 20" not in every and "30" not in every


def test_run_python_keeps_state_between_calls(url: str) -> None:
    async def rollout() -> list[str]:
        env = CodeEnvironment(url, cell_timeout_s=1.0)
        env.reset(**ROW)
        cells = ["x = 41", "x + 1", "print(x * 2)\n1 / 0", "import time\ntime.sleep(5)", "print('y' * 100_000)"]
        return [await env.run_python(code) for code in cells]

    made, value, error, slow, long = asyncio.run(rollout())
    assert made == "(the cell printed nothing and has no value)"
    assert value == "42"
    assert error.startswith("82\n") and "ZeroDivisionError: division by zero" in error and "Traceback" in error
    assert "ran past its time limit" in slow
    assert len(long) <= 2000 and "characters cut]" in long


def test_run_tests_answers_per_test_and_the_reward_uses_the_hidden_tests(url: str) -> None:
    async def rollout(env: CodeEnvironment, *programs: str) -> tuple[list[str], float | None]:
        env.reset(**ROW)
        answers = [await env.run_tests(p) for p in programs]
        return answers, await env.get_reward()

    (right,), full = asyncio.run(rollout(CodeEnvironment(url, public_tests=2), RIGHT))
    assert right == "All 2 tests passed.\nTests 1-2: passed" and full == 1.0
    (public,), partial = asyncio.run(rollout(CodeEnvironment(url, public_tests=2), PUBLIC_ONLY))
    # the shown answers, hard-coded, pass the shown tests alone: partial credit is earned on the hidden ones
    assert public == "All 2 tests passed.\nTests 1-2: passed" and partial == 0.0
    _, none = asyncio.run(rollout(CodeEnvironment(url, public_tests=2, partial=False), PUBLIC_ONLY))
    assert none == 0.0
    # The last program given is the answer: a right one after a wrong one earns the reward, and the reverse not.
    (wrong, _), fixed = asyncio.run(rollout(CodeEnvironment(url, public_tests=2), "print(3)", f"```python\n{RIGHT}```"))
    assert "1 of 2 tests passed." in wrong and "Input:\n5 5\nExpected output:\n10\nActual output:\n3" in wrong
    assert fixed == 1.0
    _, broken = asyncio.run(rollout(CodeEnvironment(url, public_tests=2), RIGHT, "print(3)"))
    assert broken == 0.0  # it passes the first test, a shown one
    _, hidden = asyncio.run(rollout(CodeEnvironment(url, public_tests=2), "print(15)"))
    assert hidden == 0.25  # the third test, a hidden one: one of the four
    _, nothing = asyncio.run(rollout(CodeEnvironment(url)))
    assert nothing == 0.0  # a rollout that gave no program


def test_partial_credit_on_the_defaults_pays_no_table_of_what_reset_showed(url: str) -> None:
    # Two tests, the first shown by reset (public_tests=1): its answer printed earns what a wrong attempt earns.
    cases = [{"input": "3 4\n", "output": "12\n"}, {"input": "10 7\n", "output": "70\n"}]
    row = {"prompt": [{"role": "user", "content": "Print the product."}], "verification_info": {"test_cases": cases}}

    async def reward(program: str) -> float | None:
        env = CodeEnvironment(url)
        shown = env.reset(**row)
        assert shown is not None and "3 4" in shown and "10 7" not in shown
        await env.submit(program)
        return await env.get_reward()

    table, wrong = asyncio.run(reward("print(12)")), asyncio.run(reward("print(sum(map(int, input().split())))"))
    assert table == wrong == 0.0
    assert asyncio.run(reward("print(70)")) == 0.5  # the hidden test passed, the shown one not: never full credit
    assert asyncio.run(reward("a, b = map(int, input().split())\nprint(a * b)")) == 1.0


def test_a_hidden_copy_of_the_public_test_pays_no_table_of_it(url: str) -> None:
    """A LiveCodeBench row whose private tests hold its public test again: the copy is seen, as the public one."""
    sample = {"input": "3\n", "output": "9\n", "testtype": "stdin"}
    hidden = [{"input": f"{n}\n", "output": f"{n * n}\n", "testtype": "stdin"} for n in (5, 7)]

    def row(private: list[dict[str, str]]) -> dict[str, str]:
        cases = {"public_test_cases": json.dumps([sample]), "private_test_cases": json.dumps(private)}
        return {"prompt": "Read n from stdin and print n squared.", **cases}

    async def reward(private: list[dict[str, str]], program: str) -> tuple[list[bool], float | None]:
        env = CodeEnvironment(url, partial=True)
        env.reset(**row(private))
        await env.submit(program)
        return env._seen, await env.get_reward()

    table, wrong, right = "print({3: 9}.get(int(input()), 0))", "print(int(input()) * 2)", "print(int(input()) ** 2)"
    seen, paid = asyncio.run(reward([sample, *hidden], table))
    assert seen == [True, True, False, False] and paid == asyncio.run(reward([sample, *hidden], wrong))[1] == 0.0
    assert asyncio.run(reward([sample, *hidden], right))[1] == 1.0
    # private tests that are only the public one again: every judged test is shown, so the row is masked
    assert asyncio.run(reward([sample], table)) == ([True, True], None)
    assert asyncio.run(reward([sample], right)) == ([True, True], None)


def test_submit_gives_the_answer_without_running_it(url: str) -> None:
    async def rollout() -> float | None:
        env = CodeEnvironment(url)
        env.reset(**ROW)
        assert await env.submit(RIGHT) == "Your program is recorded as your answer."
        return await env.get_reward()

    assert asyncio.run(rollout()) == 1.0


def test_data_with_a_split_shows_its_own_public_tests() -> None:
    contests = {
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["4 4\n"], "output": ["8\n"]},
        "generated_tests": {"input": ["9 9\n"], "output": ["18\n"]},
    }
    env = CodeEnvironment("http://127.0.0.1:9", public_tests=5)
    shown = env.reset(**contests)
    assert shown is not None and "1 2" in shown and "4 4" not in shown and "9 9" not in shown
    assert env._tests()[0].tests[1:] == [
        {"stdin": "4 4\n", "expected_stdout": "8\n"},
        {"stdin": "9 9\n", "expected_stdout": "18\n"},
    ]
    lcb = {
        "public_test_cases": '[{"input": "2\\n", "output": "4\\n", "testtype": "stdin"}]',
        "private_test_cases": '[{"input": "3\\n", "output": "9\\n", "testtype": "stdin"}]',
    }
    shown = env.reset(**lcb)
    assert shown is not None and "Input:\n2\n" in shown and "Input:\n3" not in shown
    assert len(env._tests()[0].tests) == 2


def test_a_row_that_shows_every_judged_test_earns_no_reward() -> None:
    """A reward on tests the model is shown pays a table of their answers: such a row's reward is None."""
    env = CodeEnvironment("http://127.0.0.1:9")  # masked before anything is judged: no server asked
    no_private = {
        "public_tests": {"input": ["1\n", "5\n"], "output": ["2\n", "6\n"]},
        "private_tests": {"input": [], "output": []},
        "generated_tests": {"input": [], "output": []},
    }
    lcb = {
        "public_test_cases": '[{"input": "1\\n", "output": "2\\n", "testtype": "stdin"}]',
        "private_test_cases": "[]",
    }
    asserts = ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
    listed = {
        "prompt": "Write add(a, b). It passes:\n" + "\n".join(asserts),
        "test_list": asserts,
        "entry_point": "add",
    }
    table = "def add(a, b):\n    return {(1, 2): 3, (2, 2): 4}[a, b]"
    for row in (no_private, lcb, listed):
        env.reset(**row)
        asyncio.run(env.submit(table))
        assert asyncio.run(env.get_reward()) is None, row
    env.reset(**{**listed, "prompt": "Write add(a, b). It passes:\n" + asserts[0]})  # the first shown, one hidden
    assert env._seen == [True, False]


# One assert test (HumanEval's shape): the model may see its first asserts, a cut copy of it, never the rest.
ONE_CHECK = "def check(candidate):\n" + "".join(
    f"    assert candidate({x}) == {y}\n" for x, y in [(1, 2), (2, 3), (10, 4242), (77, 1717)]
)
ONE_CHECK_ROW = {"prompt": "def f(x):\n    pass\n", "tests": ONE_CHECK, "entry_point": "f"}


def test_a_one_check_row_shows_and_runs_its_first_asserts_only() -> None:
    env = CodeEnvironment("http://127.0.0.1:9", public_tests=2)
    shown = env.reset(**ONE_CHECK_ROW)
    assert shown is not None and "candidate(1) == 2" in shown and "candidate(2) == 3" in shown
    assert "4242" not in shown and "1717" not in shown
    task, public = env._tests()
    assert public is not None and public.tests == task.visible_tests(2)  # what run_tests runs: the cut copy
    assert "4242" not in str(public.tests) and "4242" in str(task.tests)  # the reward: every assert
    # a docstring that writes the hidden asserts as examples shows them: with the first two shown, a table passes
    examples = 'def f(x):\n    """\n    >>> f(10)\n    4242\n    >>> f(77)\n    1717\n    """\n'
    env.reset(**{**ONE_CHECK_ROW, "prompt": examples})
    assert all(env._seen)
    env.reset(**{**ONE_CHECK_ROW, "prompt": examples.replace("f(77)", "f(76)")})
    assert not all(env._seen)


def test_run_tests_runs_the_program_again_each_call(url: str) -> None:
    # A program right half the time: a cached answer would repeat the first draw to every later call (and to
    # every other rollout that gives the same text); each call must run it again. All 20 alike: 2 in a million.
    flaky = "import random\na, b = map(int, input().split())\nprint(a + b if random.random() < 0.5 else 0)\n"

    async def rollout() -> set[str]:
        env = CodeEnvironment(url, public_tests=1)
        env.reset(**ROW)
        return {(await env.run_tests(flaky)).splitlines()[0] for _ in range(20)}

    assert len(asyncio.run(rollout())) == 2


def test_a_sandbox_that_fails_masks_the_reward() -> None:
    async def rollout() -> tuple[str, str, float | None]:
        env = CodeEnvironment(f"http://127.0.0.1:{free_port()}", retries=0)  # nothing listens there
        env.reset(**ROW)
        return await env.run_python("1"), await env.run_tests(RIGHT), await env.get_reward()

    cell, tests, reward = asyncio.run(rollout())
    assert cell == SANDBOX_FAILED
    assert tests.startswith("The sandbox failed to run the tests")
    assert reward is None


def test_the_next_reset_deletes_the_session(url: str) -> None:
    env = CodeEnvironment(url)
    env.reset(**ROW)

    async def cell() -> str:
        return await env.run_python("x = 1\nx")

    assert asyncio.run(cell()) == "1"
    assert env._held.session is not None
    session_id = env._held.session.session_id
    assert session_status(url, session_id) == 200
    env.reset(**ROW)
    assert session_status(url, session_id) == 410
    # the next rollout gets a fresh interpreter
    assert "NameError" in asyncio.run(env.run_python("x"))


def test_a_session_left_behind_ends_by_its_ttl(url: str) -> None:
    env = CodeEnvironment(url, session_ttl_s=1.0)
    env.reset(**ROW)
    asyncio.run(env.run_python("x = 1"))
    assert env._held.session is not None
    session_id = env._held.session.session_id
    deadline = time.monotonic() + 15
    while session_status(url, session_id) == 200 and time.monotonic() < deadline:
        time.sleep(0.25)
    assert session_status(url, session_id) == 410
    # the environment notices on its next call and goes on in a fresh interpreter
    assert asyncio.run(env.run_python("1 + 1")).endswith("earlier state is gone.]\n2")


def test_url_and_token_from_the_environment_and_a_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEGYM_SANDBOX_URL", "http://sandbox.example:8080/")
    monkeypatch.setenv("CODEGYM_SANDBOX_API_TOKEN", "secret")
    env = CodeEnvironment()
    assert (env.url, env.token) == ("http://sandbox.example:8080", "secret")
    made = code_environment("http://other:1", public_tests=1, partial=False)()
    assert (made.url, made.token, made.public_tests, made.partial) == ("http://other:1", "secret", 1, False)


def test_tools_need_a_reset_first() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        asyncio.run(CodeEnvironment("http://127.0.0.1:9").run_tests(RIGHT))


def test_it_imports_without_the_ml_stack() -> None:
    code = "import sys, codegym_evaluator.trl_env; print(sorted({'torch', 'transformers', 'trl'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_a_cell_whose_interpreter_ended_as_it_ran_is_not_run_again(url: str) -> None:
    # Told only "gone", the environment ran the cell again in a fresh interpreter and answered as though it had
    # run once (a file appended to twice, a random draw taken again).
    def listed() -> set[str]:
        return {s["session_id"] for s in httpx.get(f"{url}/v1/sessions", timeout=10).json()["sessions"]}

    async def rollout(env: CodeEnvironment) -> str:
        await env.run_python("x = 1")
        assert env._held.session is not None
        sid = env._held.session.session_id
        cell = asyncio.ensure_future(env.run_python("import time\ntime.sleep(3)\nprint('done')"))
        await asyncio.sleep(0.7)
        await asyncio.to_thread(httpx.delete, f"{url}/v1/sessions/{sid}", timeout=10)
        return await cell

    before = listed()
    env = CodeEnvironment(url, cell_timeout_s=10.0)
    env.reset(**ROW)
    answer = asyncio.run(rollout(env))
    assert "The code ran, but its interpreter ended" in answer and "deleted" in answer, answer
    assert env._held.session is None and listed() - before == set()  # no fresh interpreter ran it again
    assert "NameError" in asyncio.run(env.run_python("x"))  # the next call starts a fresh one, as it was told


def test_calls_of_one_turn_at_once_share_one_session(url: str) -> None:
    def listed() -> set[str]:
        return {s["session_id"] for s in httpx.get(f"{url}/v1/sessions", timeout=10).json()["sessions"]}

    async def turn(env: CodeEnvironment) -> list[str]:
        # TRL gathers a turn's tool calls: each must not make a session of its own (the others left to their TTL)
        return await asyncio.gather(*[env.run_python(f"import time\ntime.sleep(0.05)\nx{i} = {i}") for i in range(6)])

    before = listed()
    env = CodeEnvironment(url)
    env.reset(**ROW)
    answers = asyncio.run(turn(env))
    assert answers == ["(the cell printed nothing and has no value)"] * 6  # none failed (a 409 or a full server)
    assert env._held.session is not None
    assert listed() - before == {env._held.session.session_id}
    assert asyncio.run(env.run_python("x0 + x1 + x2 + x3 + x4 + x5")) == "15"  # one interpreter saw them all
    env.reset(**ROW)
    assert listed() - before == set()


def test_a_session_holds_a_quarter_gib_enough_for_numpy(url: str) -> None:
    env = CodeEnvironment(url)
    env.reset(**ROW)
    code = "import numpy as np\nm = np.ones((1000, 1000))\nb = bytearray(60 * 2**20)\nint((m @ m)[0, 0])"
    assert asyncio.run(env.run_python(code)) == "1000"
    assert env._held.session is not None
    # not the server's 512 MiB: every environment of TRL's pool holds its session until its next reset, and the
    # sessions together may hold SESSIONS__MEMORY_SHARE of the server's memory, so twice the pool fits
    info = httpx.get(f"{url}/v1/sessions/{env._held.session.session_id}", timeout=10).json()
    assert info["memory_mb"] == 256
    env.reset(**ROW)
