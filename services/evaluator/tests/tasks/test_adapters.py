"""Every dataset adapter on a small fixture in its hub schema, judged by a real sandbox."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import DatasetError, Task, load_tasks

FIXTURES = Path(__file__).parent.parent / "fixtures"
SANDBOX = "http://sandbox"


async def verdicts(transport: httpx.ASGITransport, task: Task, completions: list[str]) -> list[str]:
    async with Scorer(SANDBOX, transport=transport) as scorer:
        return [s.verdict for s in await scorer.score_group(task, completions)]


def test_mbpp_full_and_sanitized() -> None:
    full = load_tasks("mbpp", path=FIXTURES / "mbpp.jsonl")
    assert [t.task_id for t in full] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    assert [t.entry_point for t in full] == ["similar_elements", "is_not_prime", "heap_queue_largest"]
    assert len(full[1].tests) == 3 and full[2].tests[0]["assert_code"].startswith("import heapq\n")
    assert "Your code should pass these tests" in full[0].prompt and "similar_elements((3, 4" in full[0].prompt
    sanitized = load_tasks("mbpp-sanitized", path=FIXTURES / "mbpp_sanitized.jsonl")
    assert [t.entry_point for t in sanitized] == ["remove_Occ", "square_perimeter"]
    assert sanitized[1].tests[1]["assert_code"] == "import math\nassert math.isclose(square_perimeter(4.5), 18.0)"


@pytest.mark.anyio
async def test_mbpp_reference_code_passes(sandbox: httpx.ASGITransport) -> None:
    tasks = load_tasks("mbpp", path=FIXTURES / "mbpp.jsonl") + load_tasks(
        "mbpp-sanitized", path=FIXTURES / "mbpp_sanitized.jsonl"
    )
    for task in tasks:
        got = await verdicts(sandbox, task, [task.metadata["canonical_solution"], "def nothing(): pass"])
        assert got == ["AC", "RE"], task.task_id


def test_apps_kinds_difficulties_and_skipped_rows() -> None:
    tasks = load_tasks("apps", path=FIXTURES / "apps.jsonl")
    assert [(t.task_id, t.kind, t.difficulty) for t in tasks] == [
        ("APPS/4001", "stdio", "introductory"),
        ("APPS/2", "stdio", "interview"),
        ("APPS/4500", "call", "introductory"),
        ("APPS/3001", "assert", "competition"),
    ]  # the row without tests is skipped
    call = tasks[2]
    assert call.entry_point == "count_vowels" and call.tests[0] == {"call": ["hello"], "expected": [2, "HELLO"]}
    assert call.metadata["starter_code"] == "def count_vowels(s):\n\t"
    intro = load_tasks("apps", path=FIXTURES / "apps.jsonl", difficulty="introductory")
    assert [t.task_id for t in intro] == ["APPS/4001", "APPS/4500"]
    assert load_tasks("apps", path=FIXTURES / "apps.jsonl", difficulty="interview", limit=1)[0].task_id == "APPS/2"
    with pytest.raises(DatasetError, match=r"no task of difficulty 'easy'.*competition, interview, introductory"):
        load_tasks("apps", path=FIXTURES / "apps.jsonl", difficulty="easy")


@pytest.mark.anyio
async def test_apps_solutions_pass_in_every_format(sandbox: httpx.ASGITransport) -> None:
    for task in load_tasks("apps", path=FIXTURES / "apps.jsonl"):
        solution = f"Here is my answer:\n```python\n{task.metadata['canonical_solution']}```\n"
        got = await verdicts(sandbox, task, [solution, "```python\nprint(0)\n```"])
        assert got[0] == "AC", task.task_id
        assert got[1] != "AC", task.task_id


@pytest.mark.anyio
async def test_code_contests(sandbox: httpx.ASGITransport) -> None:
    tasks = load_tasks("code_contests", path=FIXTURES / "code_contests.jsonl")
    assert [(t.task_id, t.difficulty, len(t.tests)) for t in tasks] == [
        ("CodeContests/1000_A. Sum Of Two", "A", 3),
        ("CodeContests/1000_B. Reverse Words", "medium", 1),
    ]
    assert tasks[1].metadata["time_limit_s"] == 1.5
    assert tasks[0].metadata["canonical_solution"].startswith("a, b = map")  # the Python 3 one
    for task in tasks:
        assert await verdicts(sandbox, task, [task.metadata["canonical_solution"], "print(1)"]) == ["AC", "WA"]


@pytest.mark.anyio
async def test_livecodebench_stdin_and_functional(sandbox: httpx.ASGITransport) -> None:
    stdin, functional = load_tasks("livecodebench", path=FIXTURES / "livecodebench.jsonl")
    assert stdin.kind == "stdio" and [t["stdin"] for t in stdin.tests] == ["3\n", "4\n"]  # private ones decoded
    assert functional.kind == "assert" and functional.entry_point == "twoSum"
    assert functional.difficulty == "medium" and len(functional.tests) == 2
    assert await verdicts(sandbox, stdin, ["n = int(input())\nprint(n * n)", "print(9)"]) == ["AC", "WA"]
    two_sum = (
        "```python\nclass Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i\n```"
    )
    wrong = "```python\nclass Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n```"
    assert await verdicts(sandbox, functional, [two_sum, wrong]) == ["AC", "WA"]


def test_a_hub_dataset_without_datasets_installed_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_datasets(name: str, *args: object, **kwargs: object) -> object:
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(DatasetError, match=r"codegym-evaluator\[hub\].*--path"):
        load_tasks("mbpp")


def test_hub_ids_go_to_datasets_load_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys
    import types

    calls: list[tuple[object, ...]] = []
    rows = [json.loads(line) for line in (FIXTURES / "mbpp_sanitized.jsonl").read_text().splitlines()]

    def load_dataset(path: str, name: str | None = None, *, split: str) -> list[dict[str, object]]:
        calls.append((path, name, split))
        return rows

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    tasks = load_tasks("mbpp-sanitized", limit=1)
    assert calls == [("google-research-datasets/mbpp", "sanitized", "test")]
    assert tasks[0].task_id == "Mbpp/11"
    load_tasks("livecodebench", limit=0)
    assert calls[-1] == ("livecodebench/code_generation_lite", None, "test")
