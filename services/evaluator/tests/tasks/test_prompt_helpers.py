"""The prompt's helpers are the tests' own: a program that redefines them next to a wrong answer still fails.

HumanEval/32, /38 and /50 test with ``poly``, ``encode_cyclic`` and ``encode_shift`` from the prompt; the
LeetCode rows build and compare linked lists with the row's ``list_node`` and ``is_same_list``. Each is judged
by a real sandbox in-process.
"""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.scoring import Scorer, evaluate_body
from codegym_evaluator.tasks import Task, load_tasks
from codegym_evaluator.tasks.mbpp import MBPPAdapter
from codegym_evaluator.tasks.prompt_helpers import with_prompt_helpers

HUB = Path(__file__).parent.parent / "fixtures" / "hub"
SANDBOX = "http://sandbox"

# Per task: a wrong answer (continuing the prompt's stub), the helper it redefines, and that helper made to
# agree with the wrong answer, in the ways a program can bind a name.
WRONG = {
    "HumanEval/32": ("    return 0.0\n", "poly", "(xs, x)", "0.0"),
    "HumanEval/38": ("    return s\n", "encode_cyclic", "(s)", "s"),
    "HumanEval/50": ("    return s\n", "encode_shift", "(s)", "s"),
}
REBIND = {
    "def": "\n\ndef {name}{args}:\n    return {value}\n",
    "lambda": "\n\n{name} = lambda {bare}: {value}\n",
    "globals": "\n\nglobals()[{name!r}] = lambda {bare}: {value}\n",
    "callable-object": "\n\nclass _H:\n    def __call__(self, {bare}):\n        return {value}\n{name} = _H()\n",
    "builtins-too": "\n\nimport builtins\nbuiltins.{name} = lambda {bare}: {value}\n{name} = builtins.{name}\n",
    "not-a-function": "\n\n{name} = 0\n",
}


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Task]:
    return {t.task_id: t for t in load_tasks("humaneval") if t.task_id in WRONG}


async def verdicts(transport: httpx.ASGITransport, task: Task, completions: list[str]) -> list[str]:
    async with Scorer(SANDBOX, transport=transport, batch_runs=0) as scorer:
        return [s.verdict for s in await scorer.score_group(task, completions, extract=False)]


def rebound(task_id: str, how: str) -> str:
    _, name, args, value = WRONG[task_id]
    return REBIND[how].format(name=name, args=args, bare=args.strip("()"), value=value)


@pytest.mark.anyio
@pytest.mark.parametrize("how", sorted(REBIND))
async def test_a_redefined_helper_beside_a_wrong_answer_is_wrong(
    humaneval: dict[str, Task], sandbox: httpx.ASGITransport, how: str
) -> None:
    for task_id, task in sorted(humaneval.items()):
        wrong = WRONG[task_id][0]
        got = await verdicts(sandbox, task, [wrong, wrong + rebound(task_id, how)])
        assert got[0] == "WA" and got[1] != "AC", (task_id, how, got)


@pytest.mark.anyio
async def test_right_answers_pass_whatever_helpers_they_carry(
    humaneval: dict[str, Task], sandbox: httpx.ASGITransport
) -> None:
    # The canonical answer alone, and beside its own (right) copy of the helper, which its function uses.
    for task_id, task in sorted(humaneval.items()):
        canonical = task.metadata["canonical_solution"]
        helper = next(
            ast.unparse(n)
            for n in ast.parse(task.starter_code).body
            if isinstance(n, ast.FunctionDef) and n.name == WRONG[task_id][1]
        )
        assert await verdicts(sandbox, task, [canonical, f"{canonical}\n\n{helper}\n"]) == ["AC", "AC"], task_id


def test_only_what_the_tests_use_goes_with_them(humaneval: dict[str, Task]) -> None:
    task = humaneval["HumanEval/32"]
    (test,) = evaluate_body(task, ["x"], timeout_s=1, cache=False)["tests"]
    head, _, _ = test["assert_code"].partition("def check(")
    assert "import math" in head and "def poly(" in head and "def find_zero" not in head  # never the entry point
    assert test["assert_code"].endswith(task.tests[0]["assert_code"])
    # Tests that use nothing of the prompt, and text that does not parse, are left as they are.
    assert with_prompt_helpers("from typing import List\ndef f(x): pass\n", "f", "assert f(1)\n") == "assert f(1)\n"
    assert with_prompt_helpers("def (", "f", "assert f(1)\n") == "assert f(1)\n"
    # An import goes with tests that use a name it binds; a star import, which may bind any, always does.
    assert with_prompt_helpers("import math\ndef f(x): pass\n", "f", "assert math.isclose(f(1), 1)\n") == (
        "import math\n\nassert math.isclose(f(1), 1)\n"
    )
    star = "from collections import *\nfrom typing import List\ndef f(x): pass\n"
    headed = with_prompt_helpers(star, "f", "assert Counter(f(1)) == {1: 1}\n")
    assert "from collections import *" in headed and headed.endswith("\nassert Counter(f(1)) == {1: 1}\n")


@pytest.mark.anyio
async def test_a_star_import_of_the_prompt_rebinds_no_name_the_program_writes(sandbox: httpx.ASGITransport) -> None:
    """``from math import *`` binds ``gcd``: the tests check the program's, and a prelude name stays the tests'."""
    prompt = 'from math import *\n\ndef gcd(a, b):\n    """The greatest common divisor."""\n'
    tests = with_prompt_helpers(prompt, "gcd", "assert gcd(4, 6) == 2\nassert gcd(9, 12) == 3 and floor(pi) == 3\n")
    wrong = prompt + "    return 0\n"
    right = prompt + "    return a if b == 0 else gcd(b, a % b)\n"
    floor = "def floor(x):\n    return 3\n" + prompt + "    return 0\n"
    body = {"language": "python", "programs": [wrong, right, floor], "tests": [{"assert_code": tests}]}
    async with httpx.AsyncClient(transport=sandbox, base_url="http://sandbox") as client:
        results = (await client.post("/v1/evaluate", json=body)).json()["results"]
    assert [r["verdict"] for r in results] == ["WA", "AC", "WA"], results
    # A helper the helpers use comes too; a helper that calls the function to complete calls the program's.
    prompt = "K = 3\ndef g(x):\n    return x + K\ndef h(x):\n    return f(x)\ndef f(x):\n    pass\n"
    assert with_prompt_helpers(prompt, "f", "assert g(1) == 4\n").startswith("K = 3\n\ndef g(x):")
    assert "def f(" not in with_prompt_helpers(prompt, "f", "assert h(1) == f(1)\n")


@pytest.mark.anyio
async def test_leetcode_lists_are_built_for_the_program_and_compared_by_the_tests(
    sandbox: httpx.ASGITransport,
) -> None:
    (reverse,) = [t for t in load_tasks("leetcode", hub_root=HUB) if t.entry_point == "reverseList"]
    canonical = reverse.metadata["canonical_solution"]
    unchanged = "class Solution:\n    def reverseList(self, head):\n        return head\n"
    forged = {
        "same-is-always-true": "def is_same_list(p1, p2):\n    return True\n",
        "lists-are-all-empty": "def list_node(values):\n    return ListNode(0)\n",
        "both-helpers": "def list_node(values):\n    return None\ndef is_same_list(p1, p2):\n    return True\n",
        "node-equals-anything": "class ListNode:\n    def __init__(self, val=0, next=None):\n"
        "        self.val, self.next = val, next\n    def __eq__(self, other):\n        return True\n",
    }
    got = await verdicts(sandbox, reverse, [canonical, unchanged, *(unchanged + f for f in forged.values())])
    assert got[:2] == ["AC", "WA"], got
    assert "AC" not in got[2:], dict(zip(forged, got[2:], strict=True))
    # The right answer with its own copies of the helpers (the program's ListNode is what it gets) passes.
    assert await verdicts(sandbox, reverse, [reverse.starter_code + canonical]) == ["AC"]


@pytest.mark.anyio
async def test_mbpp_setup_code_is_the_tests_own(sandbox: httpx.ASGITransport) -> None:
    # MBPP's test_setup_code and test_imports go with each assert already: the program cannot rebind them.
    sample = {
        "task_id": 1,
        "text": "Square and add one.",
        "code": "def f(x):\n    return x * x + 1\n",
        "test_list": ["assert f(2) == expected(2)", "assert f(3) == math.floor(10.5)"],
        "test_setup_code": "def expected(x):\n    return x * x + 1\n",
        "test_imports": ["import math"],
    }
    task = MBPPAdapter().to_task(sample, 0)
    assert task is not None
    wrong = "def f(x):\n    return 0\n"
    forged = wrong + "def expected(x):\n    return 0\nclass _M:\n    floor = staticmethod(lambda x: 0)\nmath = _M()\n"
    assert await verdicts(sandbox, task, [str(sample["code"]), wrong, forged]) == ["AC", "WA", "WA"]


def test_a_prompt_is_read_once_for_all_its_tests_and_never_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 57: each test of a provided row read its starter code again (200 tests of a 214 KB prompt: 35 s, on
    the server's event loop for ``/submit``); a prompt that does not parse was read again for each too."""
    from codegym_evaluator import python_syntax

    reads: list[int] = []
    real = python_syntax.parse

    def counted(source: str, *args: object, **kwargs: object) -> object:
        reads.append(len(source))
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(python_syntax, "parse", counted)
    prompt = "".join(f"X{k} = {k}\n" for k in range(2000)) + "def helper(x):\n    return X7 + x\n"
    for k in range(50):
        assert "def helper" in with_prompt_helpers(prompt, "f", f"assert f({k}) == helper({k})")
    broken = prompt + "def (:\n"
    for k in range(50):
        assert with_prompt_helpers(broken, "f", f"assert f({k}) == 1") == f"assert f({k}) == 1"
    assert [n for n in reads if n >= len(prompt)] == [len(prompt), len(broken)]
    huge = "X = 1\n" * (python_syntax.MAX_READ_CHARS // 6 + 1)
    assert with_prompt_helpers(huge, "f", "assert f(X) == 1") == "assert f(X) == 1"
