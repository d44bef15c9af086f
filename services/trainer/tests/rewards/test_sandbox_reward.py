"""The reward function against a real sandbox app (in-process) and against no sandbox at all."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task
from codegym_evaluator.trl_reward import AsyncCodeReward
from codegym_trainer.rewards import SandboxReward
from codegym_trainer.tasks import prompt_of

pytestmark = pytest.mark.anyio

ADD = Task(
    "t/add",
    "Write add(a, b).",
    "call",
    [{"call": [1, 2], "expected": 3}, {"call": [2, 2], "expected": 4}],
    entry_point="add",
)
ECHO = Task("t/echo", "Echo a line.", "stdio", [{"stdin": "hi\n", "expected_stdout": "hi\n"}])


def fenced(code: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"Here:\n```python\n{code}\n```\n"}]


async def test_a_base_models_program_is_judged_up_to_the_fence_it_closes(sandbox_app: httpx.ASGITransport) -> None:
    # A policy without a chat template continues a prompt that ends in an open fence; a right program that closes
    # it, then writes a line of prose, is right (as codegym-eval judges it), not the prose after the fence.
    reward = SandboxReward(
        {t.task_id: t for t in (ADD, ECHO)},
        lambda: Scorer("http://sandbox", transport=sandbox_app, timeout_per_test=2.0),
    )
    prompts = [prompt_of(ADD, chat=False), prompt_of(ECHO, chat=False)]
    assert all(p.endswith("```python\n") for p in prompts)
    completions = ["def add(a, b):\n    return a + b\n```\n\nThis adds them.", "print(input())\n```\n\nIt echoes."]
    extra: dict[str, list[object]] = {}
    rewards = await reward(
        prompts=prompts,
        completions=completions,
        task_id=["t/add", "t/echo"],
        log_extra=lambda k, v: extra.__setitem__(k, v),
    )
    assert rewards == pytest.approx([1.05, 1.05]) and extra["verdict"] == ["AC", "AC"]  # closed: a fenced block
    # run on to the token limit without the close: still judged, without the format bonus
    assert await reward(prompts=prompts[:1], completions=["def add(a, b):\n    return a + b\n"], task_id=["t/add"]) == [
        pytest.approx(1.0)
    ]
    await reward.aclose()


async def test_partial_credit_is_earned_on_the_tests_the_prompt_does_not_show(
    sandbox_app: httpx.ASGITransport,
) -> None:
    # The prompt prints the first test as an example: a table of it earns no more than a wrong attempt.
    shown = Task(
        "t/mul",
        "Print the product of two integers.\n\nExample\nInput:\n3 4\nOutput:\n12\n",
        "stdio",
        [{"stdin": "3 4\n", "expected_stdout": "12\n"}, {"stdin": "10 7\n", "expected_stdout": "70\n"}],
    )
    reward = SandboxReward(
        {shown.task_id: shown},
        lambda: Scorer("http://sandbox", transport=sandbox_app, timeout_per_test=2.0),
        partial_credit=True,
    )
    completions = [fenced("print(12)"), fenced("print(sum(map(int, input().split())))"), fenced("print(70)")]
    rewards = await reward(prompts=[[]] * 3, completions=completions, task_id=["t/mul"] * 3)
    assert rewards == pytest.approx([0.05, 0.05, 0.55])  # the table, a wrong attempt, the hidden test alone
    await reward.aclose()


async def test_a_hidden_copy_of_a_public_test_earns_no_partial_credit(sandbox_app: httpx.ASGITransport) -> None:
    # The dataset's public test, then its private ones, which hold the public test again.
    copied = Task(
        "t/sq",
        "Read n and print n squared.",
        "stdio",
        [{"stdin": f"{n}\n", "expected_stdout": f"{n * n}\n"} for n in (3, 3, 5)],
        metadata={"public_tests": 1},
    )
    reward = SandboxReward(
        {copied.task_id: copied},
        lambda: Scorer("http://sandbox", transport=sandbox_app, timeout_per_test=2.0),
        partial_credit=True,
    )
    completions = [fenced("print(9)"), fenced("print(2 * int(input()))"), fenced("print(25)")]
    rewards = await reward(prompts=[[]] * 3, completions=completions, task_id=["t/sq"] * 3)
    assert rewards == pytest.approx([0.05, 0.05, 0.05 + 1 / 3])  # the table, a wrong attempt, the hidden test alone
    await reward.aclose()


async def test_tests_scheme_scores_a_batch_of_two_groups(sandbox_app: httpx.ASGITransport) -> None:
    reward = SandboxReward(
        {t.task_id: t for t in (ADD, ECHO)},
        lambda: Scorer("http://sandbox", transport=sandbox_app, timeout_per_test=2.0),
        partial_credit=True,
    )
    completions = [
        fenced("def add(a, b):\n    return a + b"),  # AC, fenced
        [{"role": "assistant", "content": "def add(a, b):\n    return 3"}],  # 1 of 2, not fenced
        fenced("def add(a, b) return"),  # CE
        fenced("def add(a, b):\n    while True: pass"),  # TLE
        fenced("print(input())"),
        fenced("print('nope')"),
    ]
    ids = ["t/add"] * 4 + ["t/echo"] * 2
    extra: dict[str, list[object]] = {}
    metrics: dict[str, float] = {}
    rewards = await reward(
        prompts=[[]] * 6,
        completions=completions,
        task_id=ids,
        log_extra=lambda k, v: extra.__setitem__(k, v),
        log_metric=lambda k, v: metrics.__setitem__(k, v),
    )
    assert rewards == pytest.approx([1.05, 0.5, -0.05, 0.0, 1.05, 0.05])
    assert extra["verdict"] == ["AC", "WA", "CE", "TLE", "AC", "WA"]
    assert extra["tests"][:2] == ["2/2", "1/2"]
    assert metrics["verdicts/pass"] == pytest.approx(2 / 6)
    assert metrics["verdicts/CE"] == pytest.approx(1 / 6)
    assert metrics["verdicts/TLE"] == pytest.approx(1 / 6)
    assert metrics["verdicts/SE"] == 0.0 and metrics["rewards/masked"] == 0.0
    assert reward.last.pass_rate == pytest.approx(2 / 6)
    await reward.aclose()


async def test_execution_scheme(sandbox_app: httpx.ASGITransport) -> None:
    reward = SandboxReward(
        {ADD.task_id: ADD},
        lambda: Scorer("http://sandbox", transport=sandbox_app, timeout_per_test=2.0),
        scheme="execution",
    )
    programs = ["print(1)", "x = 1", "def f(:", "1 / 0", "while True: pass"]
    rewards = await reward(prompts=[""] * 5, completions=programs, task_id=["t/add"] * 5)
    assert rewards == [1.0, 0.5, -0.5, -1.0, -1.0]
    await reward.aclose()


async def test_unreachable_sandbox_masks_every_reward_loudly(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reward = SandboxReward({ADD.task_id: ADD}, lambda: Scorer(f"http://127.0.0.1:{port}", retries=1, backoff_s=0.01))
    with caplog.at_level(logging.WARNING, logger="codegym"):
        rewards = await reward(prompts=[""] * 2, completions=["def add(a, b): return a + b"] * 2, task_id=["t/add"] * 2)
    assert rewards == [None, None]  # masked, never 0.0
    assert reward.masked_total == 2
    assert any("SANDBOX UNAVAILABLE" in r.getMessage() for r in caplog.records)
    await reward.aclose()


async def test_unknown_task_and_missing_column_are_errors(sandbox_app: httpx.ASGITransport) -> None:
    reward = SandboxReward({ADD.task_id: ADD}, lambda: Scorer("http://sandbox", transport=sandbox_app))
    with pytest.raises(KeyError, match="t/missing"):
        await reward(prompts=[""], completions=["x"], task_id=["t/missing"])
    with pytest.raises(ValueError, match="task_id"):
        await reward(prompts=[""], completions=["x"])
    await reward.aclose()


async def test_the_trainers_reward_and_codereward_judge_through_one_path(
    sandbox_app: httpx.ASGITransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged: list[tuple[str, list[str]]] = []
    score_group = Scorer.score_group

    async def recording(self: Scorer, task: Task, completions: list[str], *, extract: bool = True) -> list[Score]:
        scores = await score_group(self, task, completions, extract=extract)
        judged.append((task.kind, [s.verdict for s in scores]))
        return scores

    monkeypatch.setattr(Scorer, "score_group", recording)
    trainer = SandboxReward({ECHO.task_id: ECHO}, lambda: Scorer("http://sandbox", transport=sandbox_app))
    codes = ["print(input())", "print('nope')"]
    assert await trainer(prompts=[[]] * 2, completions=[fenced(c) for c in codes], task_id=[ECHO.task_id] * 2) == [
        pytest.approx(1.05),
        pytest.approx(0.05),
    ]
    await trainer.aclose()
    trl = AsyncCodeReward("http://sandbox", transport=sandbox_app)
    got = await trl(completions=[fenced(c) for c in codes], tests=[[{"input": "hi\n", "output": "hi\n"}]] * 2)
    assert got == [1.0, 0.0]
    assert judged == [("stdio", ["AC", "WA"])] * 2


def in_parts(code: str) -> list[dict[str, object]]:
    """An answer whose content is a list of text parts, as multimodal chat stacks give it."""
    parts = [{"type": "text", "text": "Here:"}, {"type": "text", "text": f"```python\n{code}\n```"}]
    return [{"role": "assistant", "content": parts}]


async def test_both_front_doors_read_an_answer_given_in_text_parts(sandbox_app: httpx.ASGITransport) -> None:
    codes = ["print(input())", "print('nope')"]
    trainer = SandboxReward({ECHO.task_id: ECHO}, lambda: Scorer("http://sandbox", transport=sandbox_app))
    got = await trainer(prompts=[[]] * 2, completions=[in_parts(c) for c in codes], task_id=[ECHO.task_id] * 2)
    assert got == [pytest.approx(1.05), pytest.approx(0.05)]  # the code in the parts, not their repr
    await trainer.aclose()
    trl = AsyncCodeReward("http://sandbox", transport=sandbox_app)
    got = await trl(completions=[in_parts(c) for c in codes], tests=[[{"input": "hi\n", "output": "hi\n"}]] * 2)
    assert got == [1.0, 0.0]


STUB = 'def add(a, b):\n    """Return the sum of a and b."""\n'
CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"
ASSERTS = ["assert add(1, 2) == 3", "assert add(5, 5) == 10"]
ADD_ASSERTS = Task("t/asserts", "Write add(a, b).", "assert", [{"assert_code": a} for a in ASSERTS], "add")
ADD_STUB = Task("t/stub", STUB, "assert", [{"assert_code": f"{CHECK}\ncheck(add)\n"}], "add", STUB)
# A chat model's answer followed by a usage example in a block of its own; a base model's body of the stub.
WITH_EXAMPLE = (
    "```python\ndef add(a, b):\n    return a + b\n```\n\nExample usage:\n\n```python\nprint(add(2, 3))\n```\n"
)
BODY = "    return a + b\n"


@pytest.mark.parametrize("prompt", ["Write add(a, b).", STUB])
async def test_both_front_doors_judge_the_same_program_of_an_answer(
    sandbox_app: httpx.ASGITransport, prompt: str
) -> None:
    trainer = SandboxReward(
        {t.task_id: t for t in (ADD_ASSERTS, ADD_STUB)},
        lambda: Scorer("http://sandbox", transport=sandbox_app),
        partial_credit=True,
    )
    got = await trainer(prompts=[prompt] * 2, completions=[WITH_EXAMPLE, BODY], task_id=["t/asserts", "t/stub"])
    assert got == [pytest.approx(1.05), pytest.approx(1.0)]  # 0.05 more for the fenced answer: the format bonus
    await trainer.aclose()
    trl = AsyncCodeReward("http://sandbox", transport=sandbox_app)
    got = await trl(prompts=[prompt], completions=[WITH_EXAMPLE], test_list=[ASSERTS], entry_point=["add"])
    assert got == [1.0]  # the block that defines the entry point, not the example after it
    got = await trl(prompts=[STUB], completions=[BODY], tests=[CHECK], entry_point=["add"])
    assert got == [1.0]  # the body after the stub it continues
