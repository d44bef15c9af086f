"""The TRL reward against a real sandbox server on loopback, through both APIs, with each dataset format."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.trl_reward import (
    AsyncCodeReward,
    CodeReward,
    ShownTestsWarning,
    UnverifiedServerWarning,
    row_tests,
)

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


def test_a_completion_whose_reading_failed_is_its_own_zero(url: str) -> None:
    """Round 58: one completion that made its extraction raise (a decorator ``ast.unparse`` could not print) masked
    its whole group's rewards: any ``ValueError`` of the scoring read as tests the sandbox would refuse."""
    reward = CodeReward(url)
    square = "```python\ndef square(x):\n    return x * x\n```"
    poison = "```python\nimport functools\n\n@functools.lru_cache(maxsize=len(f\"{'\u00a0'}\"))\ndef square(x):\n"
    poison += "    return x + x\n```"
    mbpp = ["assert square(2) == 4", "assert square(3) == 9"]
    assert reward(completions=[square, poison], test_list=[mbpp, mbpp]) == [1.0, 0.5]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_partial_credit_pays_no_table_of_the_prompts_examples(url: str, api: str) -> None:
    # Three tests, two of them the statement's examples: a table of the examples earns what a wrong attempt does.
    pairs = [("3 4", 12), ("2 5", 10), ("10 7", 70)]
    info = {"test_cases": [{"input": f"{i}\n", "output": f"{o}\n"} for i, o in pairs]}
    statement = "Print the product.\n\nExamples\nInput:\n3 4\nOutput:\n12\n\nInput:\n2 5\nOutput:\n10\n"
    prompt = [{"role": "user", "content": statement}]
    table = "```python\nprint({'3 4': 12, '2 5': 10}.get(input().strip(), 0))\n```"
    wrong = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    hidden = "```python\nprint(70)\n```"
    right = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    got = reward(prompts=[prompt] * 4, completions=[table, wrong, hidden, right], verification_info=[info] * 4)
    assert got == pytest.approx([0.0, 0.0, 1 / 3, 1.0])


def test_a_server_that_does_not_answer_masks_the_rewards() -> None:
    reward = CodeReward("http://127.0.0.1:9", timeout_s=1)
    assert reward(completions=[RIGHT, WRONG], **open_r1_columns(2)) == [None, None]


def test_a_row_whose_prompt_shows_every_test_is_masked_with_a_warning() -> None:
    """A reward on the tests a prompt prints pays a table of their answers (MBPP's prompt lists every assert)."""
    reward = CodeReward("http://127.0.0.1:9", timeout_s=1)  # masked before anything is judged: no server asked
    asserts = ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
    prompt = "Write add(a, b). Your code should pass these tests:\n" + "\n".join(asserts)
    table = "```python\ndef add(a, b):\n    return {(1, 2): 3, (2, 2): 4}[a, b]\n```"
    with pytest.warns(ShownTestsWarning, match="shows every test that judges it"):
        got = reward(prompts=[prompt], completions=[table], test_list=[asserts], entry_point=["add"])
    assert got == [None]
    chat = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]  # a chat's text parts show them too
    with pytest.warns(ShownTestsWarning):
        assert reward(prompts=[chat], completions=[table], test_list=[asserts], entry_point=["add"]) == [None]
    # the asserts written as a docstring's examples, call and value, show them as well (HumanEval's shape too)
    doctest = "Write add(a, b).\n>>> add(1, 2)\n3\n>>> add(2, 2)\n4\n"
    with pytest.warns(ShownTestsWarning):
        assert reward(prompts=[doctest], completions=[table], test_list=[asserts], entry_point=["add"]) == [None]
    check = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"
    with pytest.warns(ShownTestsWarning):
        assert reward(prompts=[doctest], completions=[table], tests=[check], entry_point=["add"]) == [None]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_mbpp_test_imports_come_before_the_asserts(url: str, api: str) -> None:
    """MBPP's sanitized split names what its asserts use in ``test_imports``, as its adapter reads it."""
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    asserts = ["assert half(1) == Fraction(1, 2)", "assert half(3) == Fraction(3, 2)"]
    honest = "```python\ndef half(n):\n    from fractions import Fraction\n    return Fraction(n, 2)\n```"
    columns = {"test_list": [asserts], "test_imports": [["from fractions import Fraction"]], "entry_point": ["half"]}
    assert reward(prompts=["Write half(n) as an exact fraction."], completions=[honest], **columns) == [1.0]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_an_apps_leetcode_row_is_judged_on_its_solution_class(url: str, api: str) -> None:
    """APPS's and TACO's LeetCode-style rows (a ``class Solution`` starter) call the method, as their adapter
    reads them: the honest class answer passes, a program leaning on the harness's ``List`` too."""
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    starter = "class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        "
    io = json.dumps({"fn_name": "maxProfit", "inputs": [[[7, 1, 5, 3, 6, 4]], [[7, 6, 4, 3, 1]]], "outputs": [5, 0]})
    honest = (
        "```python\nclass Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        best, low = 0, 10**9\n"
        "        for p in prices:\n            low = min(low, p)\n            best = max(best, p - low)\n"
        "        return best\n```"
    )
    wrong = "```python\nclass Solution:\n    def maxProfit(self, prices):\n        return 5\n```"
    got = reward(
        prompts=["Max profit."] * 2, completions=[honest, wrong], input_output=[io] * 2, starter_code=[starter] * 2
    )
    assert got == [1.0, 0.5]
    chat = [{"role": "user", "content": f"Max profit. Use this starter code:\n```python\n{starter}\n```"}]
    assert reward(prompts=[chat], completions=[honest], input_output=[io]) == [1.0]  # the starter in the prompt


def test_rows_with_the_same_tests_and_other_prompts_are_judged_apart(url: str) -> None:
    """Whether a row shows every test is its prompt's: a row that shows one assert is judged beside one that
    shows both."""
    asserts = ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
    prompts = ["Write add(a, b). It passes:\n" + "\n".join(asserts[:n]) for n in (2, 1)]
    right = "```python\ndef add(a, b):\n    return a + b\n```"
    with pytest.warns(ShownTestsWarning):
        got = CodeReward(url)(
            prompts=prompts, completions=[right] * 2, test_list=[asserts] * 2, entry_point=["add"] * 2
        )
    assert got == [None, 1.0]


def test_a_row_without_tests_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="has no tests: give it a verification_info"):
        row_tests({"prompt": ["x"]}, 0)


def passing_on(url: str, paths: frozenset[str] | None, seen: list[str]) -> httpx.MockTransport:
    """A transport to the server at ``url`` that records each path asked for; with ``paths``, only those
    reach it and the rest are 404, as on a SandboxFusion server that is not codegym (its ``/run_code`` runs a
    program as upstream's does: one process, its exit status and output)."""

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if paths is not None and request.url.path not in paths:
            return httpx.Response(404, json={"detail": "Not Found"})
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.request(
                request.method, request.url.path, content=request.content, headers={"content-type": "application/json"}
            )
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    return httpx.MockTransport(handle)


PLAIN = frozenset({"/run_code", "/v1/ping"})
# "3  \r\n": trailing spaces and a CRLF, which open-r1's harness strips (so does codegym, ``tasks.rules``)
SPACES = "```python\nimport sys\na, b = map(int, input().split())\nsys.stdout.write(f'{a + b}  \\r\\n')\n```"
OTHER = "```python\na, b = map(int, input().split())\nprint(a + b, a)\n```"  # "3 1": not what was expected
EXIT = "```python\nimport sys\ndef square(x):\n    return 0\nsys.exit(0)\n```"


def test_api_fusion_on_codegym_is_judged_by_its_checker_and_found_once(url: str) -> None:
    seen: list[str] = []
    reward = CodeReward("http://codegym", api="fusion", transport=passing_on(url, None, seen))
    completions = [RIGHT, SPACES, OTHER, WRONG]
    assert reward(completions=completions, **open_r1_columns(4)) == [1.0, 1.0, 0.0, 0.0]
    assert reward(completions=[EXIT], test_list=[["assert square(2) == 4"]]) == [0.0]
    assert seen == ["/v1/languages", "/v1/evaluate", "/v1/evaluate"]  # no warning either: pytest makes them errors


def test_a_plain_fusion_server_judges_as_codegym_does_and_warns_once(url: str) -> None:
    seen: list[str] = []
    reward = CodeReward("http://fusion", api="fusion", transport=passing_on(url, PLAIN, seen))
    native = CodeReward(url)
    completions = [RIGHT, HALF, SPACES, OTHER, WRONG, CRASH]
    with pytest.warns(UnverifiedServerWarning, match="http://fusion is not a codegym sandbox") as warned:
        got = reward(completions=completions, **open_r1_columns(6))
        square = "```python\ndef square(x):\n    return x * x\n```"
        asserts = reward(completions=[square, EXIT], test_list=[["assert square(2) == 4"]] * 2)
    assert len(warned) == 1 and seen.count("/v1/languages") == 1
    assert got == native(completions=completions, **open_r1_columns(6)) == [1.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    assert asserts == [1.0, 0.0]  # the exit before the asserts never printed the run's nonce


# Reads the nonce the fusion way's assert test prints from its own file, prints it and exits before the asserts.
FORGE = """```python
import os, re, sys
source = open(sys.argv[0] if sys.argv and sys.argv[0] else __file__).read()
found = re.findall(r"print\\('\\\\n' \\+ '([0-9a-f]{32})'", source)
if found:
    sys.stdout.write("\\n" + found[-1] + "\\n"); sys.stdout.flush(); os._exit(0)
def square(x):
    return 0
```"""


def test_api_fusion_masks_a_call_whose_probe_cannot_tell_the_server(url: str) -> None:
    seen: list[str] = []
    codegym = passing_on(url, None, seen)

    async def busy_once(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/languages" and "busy" not in seen:
            seen.append("busy")
            return httpx.Response(503, headers={"Retry-After": "0"}, text="busy")
        return await codegym.handle_async_request(request)

    reward = CodeReward("http://codegym", api="fusion", retries=0, transport=httpx.MockTransport(busy_once))
    square = "```python\ndef square(x):\n    return x * x\n```"
    rows = {"test_list": [["assert square(2) == 4", "assert square(3) == 9"]] * 2}
    assert reward(completions=[FORGE, square], **rows) == [None, None]  # never judged the forgeable way
    assert reward(completions=[FORGE, square], **rows) == [0.0, 1.0]
    assert seen == ["busy", "/v1/languages", "/v1/evaluate"]


def test_each_assert_run_gets_its_own_nonce() -> None:
    reward = CodeReward(api="fusion")
    test = {"assert_code": "assert True"}
    row = row_tests({"test_list": [["assert True"]]}, 0)
    first, second = (reward._fusion_program("pass", test, row, secrets.token_hex(16))[0] for _ in range(2))
    assert first != second
    nonce = secrets.token_hex(16)
    ok = {"status": "Success", "run_result": {"status": "Finished", "stdout": f"x\n{nonce}\n"}}
    assert reward._fusion_passed(ok, test, row, nonce) is True
    for stdout in (f"{nonce}\n", f"\n{nonce}\nafter\n", f"\n{nonce[:-1]}\n", "\n\n"):
        answer = {**ok, "run_result": {"status": "Finished", "stdout": stdout}}
        assert reward._fusion_passed(answer, test, row, nonce) is False
    assert reward._fusion_passed(ok, test, row, "") is False  # never without a nonce


# HumanEval's helpers (poly, encode_cyclic, encode_shift) are the tests' own whatever the completion defines:
# a wrong answer beside a helper redefined to agree with it gets nothing; the task's prompt reaches the reward
# as TRL gives it, a completion-style text or a chat whose user message holds the code.
HELPER_HACKS = {
    "HumanEval/32": "def find_zero(xs):\n    return 0.0\n\ndef poly(xs, x):\n    return 0.0\n",
    "HumanEval/38": "def decode_cyclic(s):\n    return s\n\ndef encode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def decode_shift(s):\n    return s\n\nencode_shift = lambda s: s\n",
}


def _as_prompt(prompt: str, style: str) -> object:
    """The prompt as TRL gives it: the stub itself, as prose (an instruction, then the stub unfenced, then more
    words), or in a chat's user message, fenced or as that prose, or as its system message."""
    prose = f"Complete the following Python function.\n\n{prompt}\nAnswer with the whole function.\n"
    if style in ("text", "prose"):
        return prompt if style == "text" else prose
    if style == "system":
        return [{"role": "system", "content": prompt}, {"role": "user", "content": "Complete the function above."}]
    content = prose if style == "chat-prose" else f"Complete the last function:\n```python\n{prompt}```"
    return [{"role": "system", "content": "You write Python."}, {"role": "user", "content": content}]


@pytest.mark.parametrize("api", ["native", "fusion"])
@pytest.mark.parametrize("style", ["text", "chat", "prose", "chat-prose", "system"])
def test_helpers_the_completion_redefines_are_not_the_tests(url: str, api: str, style: str) -> None:
    from codegym_evaluator.tasks import load_tasks

    tasks = [t for t in load_tasks("humaneval") if t.task_id in HELPER_HACKS]
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    prompts, completions, tests, entries = [], [], [], []
    for task in tasks:
        canonical = f"{task.prompt}{task.metadata['canonical_solution']}"
        for program in (canonical, HELPER_HACKS[task.task_id], f"{canonical}\n\n{HELPER_HACKS[task.task_id]}"):
            prompts.append(_as_prompt(task.prompt, style))
            completions.append(f"```python\n{program}```")
            tests.append(task.tests[0]["assert_code"])
            entries.append(task.entry_point)
    got = reward(prompts=prompts, completions=completions, tests=tests, entry_point=entries)
    # Per task: the right program passes; the hack fails alone, and wins nothing beside a right helper's
    # definition either (its redefinitions come last, so its own function is the wrong one).
    assert got == [1.0, 0.0, 0.0] * len(tasks), got
    # Without the prompt the tests cannot tell the helpers: the hack passes there (its answer calls its helper,
    # so the sanitiser keeps it), which is why TRL's prompt is read (and why a row needs its entry_point).
    hack = "```python\ndef poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return poly(xs, 0.0)\n```"
    blind = reward(prompts=None, completions=[hack], tests=tests[:1], entry_point=entries[:1])
    assert blind == [1.0]


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_a_program_may_rely_on_the_prompts_standard_imports(url: str, api: str) -> None:
    """LeetCode's prompts start ``from typing import *``, and a completion that writes ``List[int]`` relies on it, as
    the library's tasks (whose starter code goes before the program) let it. Another module the prompt imports
    (an example's ``pandas``) may not be installed where the program runs: never put before it."""
    head = "class Solution:\n    def twoSum(self, nums: List[int]) -> int:\n"
    stub = "from typing import *\nimport no_such_module_here\n\n" + head
    prompt = [{"role": "user", "content": f"Complete it:\n```python\n{stub}```"}]
    right, wrong = (f"```python\n{head}        return {body}\n```" for body in ("sum(nums)", "0"))
    tests = "assert Solution().twoSum([1, 2]) == 3\n"
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    got = reward(prompts=[prompt] * 2, completions=[right, wrong], tests=[tests] * 2, entry_point=["Solution"] * 2)
    assert got == [1.0, 0.0]


def test_a_call_runs_output_past_what_json_reads_is_a_wrong_answer() -> None:
    """A number of 5,000 digits (past int's limit) or nesting past the stack raised out of the reward function
    on a server that is not codegym, and the whole batch's rewards went with it."""
    reward = CodeReward(api="fusion")
    row = row_tests({"input_output": [json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]})]}, 0)
    for stdout in ("1" * 5000, "[" * 100_000, "not json"):
        answer = {"status": "Success", "run_result": {"status": "Finished", "stdout": stdout}}
        assert reward._fusion_passed(answer, row.tests[0], row) is False


@pytest.mark.parametrize("api", ["native", "fusion"])
def test_the_prompts_imports_leave_a_programs_future_imports_first(url: str, api: str) -> None:
    """``from __future__`` must open a file: put after the prompt's imports, an honest completion did not compile."""
    prompt = [
        {
            "role": "user",
            "content": "Complete:\n```python\nfrom typing import List\n\ndef f(xs: List[int]) -> int:\n```",
        }
    ]
    future = "```python\nfrom __future__ import annotations\n\ndef f(xs: list[int]) -> int:\n    return sum(xs)\n```"
    reward = CodeReward(url, api=api)  # type: ignore[arg-type]
    got = reward(prompts=[prompt], completions=[future], test_list=[["assert f([1, 2]) == 3"]], entry_point=["f"])
    assert got == [1.0]
