"""Every dataset adapter on a copy of its hub repository (``fixtures/hub``), judged by a real sandbox.

The copies hold the hub's file names and formats (see ``fixtures/hub/make_fixtures.py``); ``load_tasks``
reads them through the same code that reads the hub, with the hub root pointed at them.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import PUBLIC_TESTS, DatasetError, Task, load_tasks
from codegym_evaluator.tasks.apps import APPSAdapter
from codegym_evaluator.tasks.livecodebench import LiveCodeBenchAdapter

HUB = Path(__file__).parent.parent / "fixtures" / "hub"
SANDBOX = "http://sandbox"


def hub_tasks(dataset: str, **kwargs: object) -> list[Task]:
    return load_tasks(dataset, hub_root=HUB, **kwargs)  # type: ignore[arg-type]


async def verdicts(transport: httpx.ASGITransport, task: Task, completions: list[str]) -> list[str]:
    async with Scorer(SANDBOX, transport=transport) as scorer:
        return [s.verdict for s in await scorer.score_group(task, completions)]


def test_visible_tests_the_one_rule_of_what_a_model_may_see() -> None:
    # codegym-eval --turns, codegym-train --task code-repair and TRL's CodeEnvironment all show these
    def task(n: int, **metadata: object) -> Task:
        tests = [{"stdin": f"{i}\n", "expected_stdout": ""} for i in range(n)]
        return Task("t", "p", "stdio", tests, metadata=metadata)

    three = task(3)
    assert PUBLIC_TESTS == 1 and three.visible_tests() == three.tests[:1]
    # no split: the first N, always one hidden; a lone test is never shown (a later turn would fit it)
    assert [len(three.visible_tests(n)) for n in (0, 1, 2, 3, 9)] == [0, 1, 2, 2, 2]
    assert [len(task(1).visible_tests(n)) for n in (0, 1, 9)] == [0, 0, 0]
    # a split: the dataset's public tests whatever the count, none where it marks none (never a hidden one)
    assert [len(task(3, public_tests=2).visible_tests(n)) for n in (0, 1, 9)] == [2, 2, 2]
    assert task(3, public_tests=0).visible_tests(9) == [] and task(3, public_tests=3).visible_tests(1) == three.tests
    assert task(3, public_tests=True).visible_tests(9) == three.tests[:2]  # not a count: no split
    with pytest.raises(ValueError, match="public_tests"):
        three.visible_tests(-1)
    (apps,) = [t for t in hub_tasks("apps") if len(t.tests) > 1][:1]
    assert apps.visible_tests(99) == apps.tests[:-1]


@pytest.mark.anyio
async def test_one_assert_test_shows_its_first_asserts_and_hides_the_rest(sandbox: httpx.ASGITransport) -> None:
    """HumanEval's one test holds every assert: shown whole, a repair could fit each one it is then judged by."""
    check = "def check(candidate):\n    x = 1\n    assert candidate(x, 2) == 3\n    assert candidate(5, 7) == 12\n"
    loop = "    for a in range(3):\n        assert candidate(a, a) == 2 * a\n"
    task = Task("t", "Write add(a, b).", "assert", [{"assert_code": check + loop + "\ncheck(add)\n"}], "add")
    (shown,) = task.visible_tests(1)
    assert "candidate(x, 2) == 3" in shown["assert_code"] and "x = 1" in shown["assert_code"]
    assert "candidate(5, 7)" not in shown["assert_code"] and "range(3)" not in shown["assert_code"]
    assert task.visible_tests(2)[0]["assert_code"].count("assert") == 2
    assert task.visible_tests(3) == task.visible_tests(0) == []  # none would stay hidden; none asked for
    # What only the hidden asserts use goes with them (their cases' table, a reference they compare with), and so
    # does what merely builds or shows it, and checks written as a raise: none of the hidden cases shows.
    hidden = (
        "def _ref(a, b):\n    return a + b\n\ndef check(candidate):\n    cases = [(5, 7), (10, -3)]\n"
        "    assert candidate(1, 2) == 3\n    for a, b in cases:\n        assert candidate(a, b) == _ref(a, b)\n\n"
        "check(add)\n"
    )
    built = (
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    more = []\n    more.append(((5, 7), 12))\n"
        "    print(more)\n    for args, want in more:\n        assert candidate(*args) == want\n"
        "    if candidate(10, -3) != 7:\n        raise AssertionError\n\ncheck(add)\n"
    )
    for code, leaks in ((hidden, ("cases", "_ref")), (built, ("12", "10, -3"))):
        (cut,) = Task("t", "", "assert", [{"assert_code": code}], "add").visible_tests(1)
        assert not any(leak in cut["assert_code"] for leak in leaks), cut["assert_code"]
    # What the shown asserts read and the hidden ones read too (a table of every case's answer) would show the
    # hidden answers: nothing of such a test is shown. An import is no answer, shared or not.
    shared = (
        "import math\nWANT = {(1, 2): 3, (5, 7): 4242}\n\ndef check(candidate):\n"
        "    assert math.isclose(candidate(1, 2), WANT[1, 2])\n    assert math.isclose(candidate(5, 7), WANT[5, 7])\n"
        "\ncheck(add)\n"
    )
    looped = "CASES = [(1, 2, 3), (5, 7, 4242)]\nassert add(*CASES[0][:2]) == CASES[0][2]\nfor a, b, c in CASES[1:]:\n"
    looped += "    assert add(a, b) == c\n"
    # Nor where the answers are bound by what else is shown: the checking function's own line (a parameter's
    # default, a decorator that passes one) or a shown assert itself.
    check = "    assert candidate(1, 2) == {0}\n    assert candidate(5, 7) == {1}\n\ncheck(add)\n"
    defaults = "def check(candidate, t=(3, 4242)):\n" + check.format("t[0]", "t[1]")
    keyword = "def check(candidate, *, t={1: 3, 5: 4242}):\n" + check.format("t[1]", "t[5]")
    decorated = "import functools\n@functools.partial(lambda f, d: lambda c: f(c, d), d={1: 3, 5: 4242})\n"
    decorated += "def check(candidate, d):\n" + check.format("d[1]", "d[5]")
    walrus = "def check(candidate):\n" + check.format("(t := [3, 4242])[0]", "t[1]")
    for code in (shared, looped, defaults, keyword, decorated, walrus):
        assert Task("t", "", "assert", [{"assert_code": code}], "add").visible_tests(1) == [], code
    imports = "import math\nassert math.isclose(add(1, 2), 3)\nassert math.isclose(add(5, 7), 4242)\n"
    (cut,) = Task("t", "", "assert", [{"assert_code": imports}], "add").visible_tests(1)
    assert "import math" in cut["assert_code"] and "4242" not in cut["assert_code"]
    lone = Task("t", "", "assert", [{"assert_code": "assert add(1, 2) == 3\n"}], "add")
    assert lone.visible_tests(1) == []
    # What is shown runs: a program that fits it passes it, and fails the task.
    fits = "def add(a, b):\n    return 3\n"
    shown_task = Task("t", "", "assert", task.visible_tests(1), "add")
    assert await verdicts(sandbox, shown_task, [fits]) == ["AC"]
    assert await verdicts(sandbox, task, [fits]) == ["WA"]


def test_mbpp_full_and_sanitized_from_their_parquet_files() -> None:
    (full,) = hub_tasks("mbpp")  # full/test-00000-of-00001.parquet
    assert full.task_id == "Mbpp/11" and full.entry_point == "remove_Occ" and len(full.tests) == 3
    assert "Your code should pass these tests" in full.prompt and 'remove_Occ("hello","l")' in full.prompt
    assert full.public_tests == full.tests  # the prompt shows every test of test_list
    prompt = hub_tasks("mbpp", split="prompt")  # full/prompt-00000-of-00001.parquet
    assert [t.task_id for t in prompt] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    assert [t.entry_point for t in prompt] == ["similar_elements", "is_not_prime", "heap_queue_largest"]
    assert len(prompt[1].tests) == 3 and prompt[2].tests[0]["assert_code"].startswith("import heapq\n")
    sanitized = hub_tasks("mbpp-sanitized")  # sanitized/test-00000-of-00001.parquet, not full/
    assert [t.entry_point for t in sanitized] == ["remove_Occ", "square_perimeter"]
    assert sanitized[1].tests[1]["assert_code"] == "import math\nassert math.isclose(square_perimeter(4.5), 18.0)"


def test_a_training_prompt_never_shows_every_test_that_judges_it() -> None:
    """A reward on the tests a prompt shows pays a table of their answers. For training, MBPP shows its first
    assert alone (it names the function) and every assert judges; a task whose prompt shows all its tests and
    that has no training prompt is no training task."""
    (full,) = hub_tasks("mbpp")
    trained = full.for_training()
    assert trained is not None and trained.tests == full.tests and trained.entry_point == full.entry_point
    asserts = [t["assert_code"] for t in full.tests]
    assert asserts[0] in trained.prompt and not any(a in trained.prompt for a in asserts[1:])
    assert trained.public_tests == full.tests[:1] and trained.visible_tests() == full.tests[:1]
    shown_all = Task("t", "p", "stdio", [{"stdin": "1", "expected_stdout": "1"}], metadata={"public_tests": 1})
    assert shown_all.for_training() is None
    hidden = Task("t", "p", "stdio", [{"stdin": str(i), "expected_stdout": ""} for i in range(2)])
    assert hidden.for_training() is hidden and hidden.public_tests is None
    # no split marked, but the statement prints every test (its examples): a lookup table of them would pass
    examples = "Sum two numbers.\nInput\n1 2\nOutput\n3\n\nInput\n5   7\nOutput\n12"
    sums = [{"stdin": "1 2\n", "expected_stdout": "3\n"}, {"stdin": "5 7\n", "expected_stdout": "12\n"}]
    assert Task("t", examples, "stdio", sums).for_training() is None
    assert Task("t", examples, "stdio", [*sums, {"stdin": "9 9\n", "expected_stdout": "18\n"}]).for_training()
    # a dataset that counts one public test, whose statement prints the other too
    assert Task("t", examples, "stdio", sums, metadata={"public_tests": 1}).for_training() is None
    hello = Task("t", "Print Hello, World!", "stdio", [{"stdin": "", "expected_stdout": "Hello, World!\n"}])
    assert hello.for_training() is hello  # a test without input whose output the task names is the task itself
    # call tests (a Codewars row of APPS) are shown where the statement prints their arguments and values
    codewars = "Return the persistence of num.\nFor example:\n\n    persistence(39) => 3  # 3*9 = 27\n" + (
        "    persistence(999) => 4\n    persistence(4) => 0   # one digit\n"
    )
    calls = [{"call": [39], "expected": 3}, {"call": [999], "expected": 4}, {"call": [4], "expected": 0}]
    assert Task("t", codewars, "call", calls, "persistence").for_training() is None
    more = [*calls, {"call": [25], "expected": 2}]
    assert Task("t", codewars, "call", more, "persistence").for_training() is not None
    assert Task("t", codewars, "call", [{"call": [390], "expected": 3}, *calls], "persistence").for_training()
    # the asserts codegym writes from a LeetCode-style row's call data: the statement's examples show them
    leetcode = "Example 1:\nInput: nums = [2, 7, 11, 15], target = 9\nOutput: [0,1]\n\nExample 2:\n" + (
        "Input: nums = [3,2,4], target = 6\nOutput: [1, 2]\nExplanation: nums[1] + nums[2] == 6"
    )
    io = {"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]], "outputs": [[[0, 1]], [[1, 2]]]}
    row = {"id": 1, "question": leetcode, "starter_code": "class Solution:\n    def twoSum(self, nums, target):"}
    solution = APPSAdapter().to_task({**row, "input_output": json.dumps(io)}, 0)
    assert solution is not None and solution.kind == "assert" and solution.for_training() is None
    io["inputs"].append([[1, 3], 4]), io["outputs"].append([[0, 1]])
    assert APPSAdapter().to_task({**row, "input_output": json.dumps(io)}, 0).for_training() is not None  # type: ignore[union-attr]
    for dataset in ("mbpp", "mbpp-sanitized", "apps", "code_contests", "livecodebench", "taco"):
        for task in hub_tasks(dataset):
            view = task.for_training()
            assert view is None or view.public_tests is None or len(view.public_tests) < len(view.tests), task.task_id


@pytest.mark.anyio
async def test_mbpp_reference_code_passes(sandbox: httpx.ASGITransport) -> None:
    for task in hub_tasks("mbpp-sanitized") + hub_tasks("mbpp", split="prompt"):
        got = await verdicts(sandbox, task, [task.metadata["canonical_solution"], "def nothing(): pass"])
        assert got == ["AC", "RE"], task.task_id


def test_apps_kinds_difficulties_and_skipped_rows() -> None:
    tasks = hub_tasks("apps")  # test.jsonl, whose rows number their problem in "id"
    assert all(t.public_tests is None for t in tasks)  # APPS has no public/private split
    assert [(t.task_id, t.kind, t.difficulty) for t in tasks] == [
        ("APPS/4001", "stdio", "introductory"),
        ("APPS/2", "stdio", "interview"),
        ("APPS/4500", "call", "introductory"),
        ("APPS/3001", "assert", "competition"),
    ]  # the row without tests is skipped
    call = tasks[2]
    assert call.entry_point == "count_vowels" and call.tests[0] == {"call": ["hello"], "expected": [2, "HELLO"]}
    assert call.metadata["starter_code"] == "def count_vowels(s):\n\t"
    assert tasks[0].prompt.startswith("You are given two integers a and b.")
    assert tasks[0].tests == [
        {"stdin": "1 2\n", "expected_stdout": "3\n"},
        {"stdin": "10 -3\n", "expected_stdout": "7\n"},
    ]
    assert [t.task_id for t in hub_tasks("apps", split="train")] == ["APPS/0"]  # train.jsonl
    assert [t.task_id for t in hub_tasks("apps", difficulty="introductory")] == ["APPS/4001", "APPS/4500"]
    assert hub_tasks("apps", difficulty="interview", limit=1)[0].task_id == "APPS/2"
    with pytest.raises(DatasetError, match=r"no task of difficulty 'easy'.*competition, interview, introductory"):
        hub_tasks("apps", difficulty="easy")


def test_apps_rows_copied_through_its_script_name_the_problem_problem_id(tmp_path: Path) -> None:
    # Copies made with the script (and its parquet conversions) call the column problem_id.
    source = (HUB / "codeparrot" / "apps" / "test.jsonl").read_text()
    (tmp_path / "apps.jsonl").write_text(source.replace('{"id": ', '{"problem_id": '))
    assert [t.task_id for t in load_tasks("apps", path=tmp_path / "apps.jsonl")][:2] == ["APPS/4001", "APPS/2"]


@pytest.mark.anyio
async def test_apps_solutions_pass_in_every_format(sandbox: httpx.ASGITransport) -> None:
    for task in hub_tasks("apps"):
        solution = f"Here is my answer:\n```python\n{task.metadata['canonical_solution']}```\n"
        got = await verdicts(sandbox, task, [solution, "```python\nprint(0)\n```"])
        assert got[0] == "AC", task.task_id
        assert got[1] != "AC", task.task_id


@pytest.mark.anyio
async def test_code_contests(sandbox: httpx.ASGITransport) -> None:
    tasks = hub_tasks("code_contests")  # data/test-00000-of-00001-<hash>.parquet: tests and limits are structs
    assert [(t.task_id, t.difficulty, len(t.tests)) for t in tasks] == [
        ("CodeContests/1000_A. Sum Of Two", "A", 3),
        ("CodeContests/1000_B. Reverse Words", "medium", 1),
    ]
    assert tasks[0].tests[1] == {"stdin": "5 6\n", "expected_stdout": "11\n"}  # public, then private
    assert tasks[0].public_tests == tasks[0].tests[:1] and tasks[1].public_tests == tasks[1].tests
    assert tasks[1].metadata["time_limit_s"] == 1.5 and tasks[0].metadata["cf_rating"] == 800
    assert tasks[0].metadata["canonical_solution"].startswith("a, b = map")  # the Python 3 one
    for task in tasks:
        assert await verdicts(sandbox, task, [task.metadata["canonical_solution"], "print(1)"]) == ["AC", "WA"]


def test_livecodebench_versions_pick_the_release_files() -> None:
    def ids(version: str | None) -> list[str]:
        return [t.task_id.split("/")[1] for t in hub_tasks("livecodebench", split=version)]

    assert ids(None) == ids("release_latest") == ids("test") == ["abc001_a", "3001", "1990A"]
    assert ids("release_v1") == ["abc001_a"]  # test.jsonl
    assert ids("release_v2") == ["abc001_a", "3001"]  # test.jsonl, test2.jsonl
    assert ids("v2") == ["3001"] and ids("v3") == ["1990A"]  # only what a release added
    assert ids("v2_v3") == ["3001", "1990A"]


@pytest.mark.anyio
async def test_livecodebench_stdin_and_functional(sandbox: httpx.ASGITransport) -> None:
    stdin, functional, _ = hub_tasks("livecodebench")
    assert stdin.kind == "stdio" and [t["stdin"] for t in stdin.tests] == ["3\n", "4\n"]  # private ones decoded
    assert stdin.public_tests == stdin.tests[:1]  # the public case; the private one stays hidden
    assert stdin.prompt == "Read an integer N and print N squared." and stdin.metadata["platform"] == "atcoder"
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


def test_taco_kinds_and_labels() -> None:
    tasks = hub_tasks("taco")  # ALL/test-00000-of-00001.parquet
    assert [(t.task_id, t.kind, t.entry_point, t.difficulty) for t in tasks] == [
        ("TACO/0", "stdio", None, "EASY"),
        ("TACO/1", "call", "add_binary", "EASY"),
        ("TACO/2", "assert", "reverseWord", "MEDIUM"),  # a class Solution starter: asserts on the method
    ]
    stdio, call, method = tasks
    assert stdio.tests[0] == {"stdin": "3\n1 5 2\n", "expected_stdout": "5\n"} and stdio.prompt.startswith("Given n")
    assert call.tests[2] == {"call": [51, 12], "expected": "111111"}  # the expected value is unwrapped
    assert stdio.metadata["tags"] == ["Sorting"] and stdio.metadata["skill_types"] == ["Sorting"]
    assert stdio.metadata["source"] == "codeforces" and stdio.metadata["time_limit"] == "1 second"
    assert method.metadata["tags"] == ["Strings", "Data Structures"]
    assert method.metadata["starter_code"].startswith("#User function Template for python3\n\nclass Solution:")
    assert [t.difficulty for t in hub_tasks("taco", split="train")] == ["UNKNOWN_DIFFICULTY"]  # ALL/train-*
    assert [t.task_id for t in hub_tasks("taco", difficulty="MEDIUM")] == ["TACO/2"]


@pytest.mark.anyio
async def test_taco_solutions_pass_and_wrong_ones_fail(sandbox: httpx.ASGITransport) -> None:
    wrong = {
        "stdio": "print(5)",
        "call": "def add_binary(a, b):\n    return str(a + b)\n",
        "assert": "class Solution:\n    def reverseWord(self, s):\n        return s\n",
    }
    for task in hub_tasks("taco"):
        got = await verdicts(sandbox, task, [task.metadata["canonical_solution"], wrong[task.kind]])
        assert got == ["AC", "WA"], task.task_id


def test_leetcode_rows_become_assert_tasks_on_the_method() -> None:
    two_sum, reverse = hub_tasks("leetcode")  # LeetCodeDataset-test.jsonl
    assert (two_sum.task_id, two_sum.kind, two_sum.entry_point, two_sum.difficulty) == (
        "LeetCode/two-sum",
        "assert",
        "twoSum",
        "Easy",
    )
    assert two_sum.prompt.startswith("Given an array of integers nums and an integer target")
    (test,) = two_sum.tests
    assert test["assert_code"].startswith("def check(candidate):\n    assert candidate(nums = [2,7,11,15]")
    assert test["assert_code"].endswith("\n\ncheck(Solution().twoSum)\n")
    # the row's own imports and helpers run before the model's code; the model is shown the class to write
    assert "def list_node(values: list):" in reverse.starter_code and "from typing import *" in reverse.starter_code
    assert two_sum.metadata["starter_code"].startswith("class Solution:\n    def twoSum(self, nums: List[int]")
    assert two_sum.metadata["tags"] == ["Array", "Hash Table"] and two_sum.metadata["question_id"] == 1
    assert [t.task_id for t in hub_tasks("leetcode", split="train")] == ["LeetCode/add-two-integers"]


@pytest.mark.anyio
async def test_leetcode_reference_passes_and_wrong_ones_fail(sandbox: httpx.ASGITransport) -> None:
    two_sum, reverse = hub_tasks("leetcode")
    constant = (
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        return [0, 1]\n"
    )
    assert await verdicts(sandbox, two_sum, [two_sum.metadata["canonical_solution"], constant]) == ["AC", "WA"]
    # linked lists: the tests build them with the row's list_node and compare with its is_same_list
    unchanged = (
        "class Solution:\n    def reverseList(self, head: Optional[ListNode]) -> Optional[ListNode]:\n"
        "        return head\n"
    )
    assert await verdicts(sandbox, reverse, [reverse.metadata["canonical_solution"], unchanged]) == ["AC", "WA"]


@pytest.mark.anyio
async def test_programs_run_after_their_harnesses_prelude(sandbox: httpx.ASGITransport) -> None:
    """lcb_runner and APPS's testing_util put their imports and process settings before every program: a right
    program leaning on them (deque, gcd unimported, a deep recursion, a 6,000-digit int) is right there."""
    cases = [{"input": "3000\n", "output": "3000\n", "testtype": "stdin"}, {"input": "5\n", "output": "5\n"}]
    lcb = {"question_id": "x", "public_test_cases": json.dumps(cases[:1]), "private_test_cases": json.dumps(cases[1:])}
    lcb_task = LiveCodeBenchAdapter().to_task(lcb, 0)
    io = {"inputs": ["3000\n", "5\n"], "outputs": ["3000\n", "5\n"]}
    apps_task = APPSAdapter().to_task({"id": 3, "question": "q", "input_output": json.dumps(io)}, 0)
    deque_ = "```python\nn = int(input())\nprint(len(deque(range(n))))\n```"
    gcd_ = "```python\nn = int(input())\nprint(n if gcd(n, n) == n else 0)\n```"
    deep = "```python\ndef walk(k):\n    return 0 if k == 0 else 1 + walk(k - 1)\nprint(walk(int(input())))\n```"
    wrong = "```python\nprint(len(deque()))\n```"
    assert lcb_task is not None and apps_task is not None
    assert await verdicts(sandbox, lcb_task, [deque_, gcd_, deep, wrong]) == ["AC", "AC", "AC", "WA"]
    assert await verdicts(sandbox, apps_task, [deque_, gcd_, wrong]) == ["AC", "AC", "WA"]
    big = [{"input": "6000\n", "output": "9" * 6000 + "\n", "testtype": "stdin"}]
    digits = LiveCodeBenchAdapter().to_task({"question_id": "d", "public_test_cases": json.dumps(big)}, 0)
    assert digits is not None
    assert await verdicts(sandbox, digits, ["```python\nprint(10 ** int(input()) - 1)\n```"]) == ["AC"]


def test_a_livecodebench_case_past_the_interpreters_digits_leaves_its_row_out() -> None:
    """An expected integer of 5,001 digits does not read under codegym's limit: the row is left out, never the
    whole dataset's load."""
    case = {"input": "[1]", "output": "1" * 5001, "testtype": "functional"}
    row = {"question_id": "b", "public_test_cases": json.dumps([case]), "metadata": json.dumps({"func_name": "f"})}
    assert LiveCodeBenchAdapter().to_task(row, 0) is None


@pytest.mark.anyio
async def test_a_method_row_answered_with_a_top_level_function_is_called_as_its_harness_calls_it(
    sandbox: httpx.ASGITransport,
) -> None:
    """lcb_runner and APPS's testing_util call ``Solution().<fn>`` only where the program defines the class, else
    the program's own ``<fn>``; never a builtin or a prelude's name that a program defines nothing for."""
    cases = [{"input": "[1, 2, 3]", "output": "6", "testtype": "functional"}]
    row = {"question_id": "s", "public_test_cases": json.dumps(cases), "metadata": json.dumps({"func_name": "sumAll"})}
    task = LiveCodeBenchAdapter().to_task(row, 0)
    top = "```python\ndef sumAll(nums):\n    return sum(nums)\n```"
    cls = "```python\nclass Solution:\n    def sumAll(self, nums):\n        return sum(nums)\n```"
    both = "```python\ndef sumAll(nums):\n    return 6\n" + cls.removeprefix("```python\n").replace("sum(nums)", "0")
    assert task is not None
    assert await verdicts(sandbox, task, [top, cls, both, "```python\nx = 1\n```"]) == ["AC", "AC", "WA", "RE"]
    named = {**row, "metadata": json.dumps({"func_name": "sum"})}  # a builtin's name: the class only
    assert "except NameError" not in LiveCodeBenchAdapter().to_task(named, 0).tests[0]["assert_code"]  # type: ignore[union-attr]
    io = {"fn_name": "gcd", "inputs": [[4, 6]], "outputs": [[2]]}  # a name APPS's prelude binds
    apps = APPSAdapter().to_task(
        {"id": 9, "question": "q", "starter_code": "class Solution:", "input_output": json.dumps(io)}, 0
    )
    assert apps is not None and await verdicts(sandbox, apps, ["```python\nx = 1\n```"]) == ["RE"]


@pytest.mark.anyio
async def test_an_apps_call_row_answered_with_a_solution_class_is_called_on_it(sandbox: httpx.ASGITransport) -> None:
    """APPS's testing_util calls ``Solution().<fn>`` where the program writes ``class Solution``, whatever the row."""
    io = {"fn_name": "count_vowels", "inputs": [["hello"], ["xyz"]], "outputs": [[2], [0]]}
    row = {
        "id": 7,
        "question": "Count vowels.",
        "starter_code": "def count_vowels(s):\n",
        "input_output": json.dumps(io),
    }
    task = APPSAdapter().to_task(row, 0)
    assert task is not None and task.kind == "call"
    cls = "```python\nclass Solution:\n    def count_vowels(self, s):\n        return sum(c in 'aeiou' for c in s)\n```"
    wrong = cls.replace("sum(", "1 + sum(")
    top = "```python\ndef count_vowels(s):\n    return sum(c in 'aeiou' for c in s)\n```"
    assert await verdicts(sandbox, task, [cls, wrong, top]) == ["AC", "WA", "AC"]
    plain = Task("t", "p", "call", task.tests, "count_vowels")  # codegym's own tasks: the top-level function
    assert await verdicts(sandbox, plain, [cls]) == ["RE"]
