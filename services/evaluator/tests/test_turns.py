"""Turns of execution feedback (``--turns``): a wrong answer reads what its program did on the public tests and
answers again; pass@1 after each turn, resumed where a run stopped, refused without a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.cli import main
from codegym_evaluator.config import RunConfig
from codegym_evaluator.report import summary_table, write_report
from codegym_evaluator.runner import run_evaluation
from codegym_evaluator.tasks import Task
from codegym_evaluator.turn_stats import turns_summary
from fastapi import FastAPI

from .fake_openai import fake_openai_app
from .test_runner import Counting, lines

pytestmark = pytest.mark.anyio
SANDBOX = "http://sandbox"
READ = "a, b = map(int, input().split())\n"

# (task, its tests, how many of them are public, the answer of each turn: the last one is kept after that)
TASKS: list[tuple[str, str, list[tuple[str, str]], int | None, list[str]]] = [
    # public test fails on turn 1; the hidden one's data must never reach the model
    ("sum", "Print a + b.", [("1 2\n", "3\n"), ("1234 4321\n", "5555\n")], 1,
     [READ + "print(a * b)", READ + "print(a + b)"]),
    # the public test passes, a hidden one fails: the feedback can only say so; fixed at turn 3
    ("max", "Print the larger of a and b.", [("5 3\n", "5\n"), ("31337 99999\n", "99999\n")], 1,
     [READ + "print(a)", READ + "print(a)", READ + "print(max(a, b))"]),
    # no public/private split: the feedback shows the first test, never the second, however many --public-tests
    # asks for (Task.visible_tests leaves one hidden)
    ("double", "Print 2n.", [("7\n", "14\n"), ("4242\n", "8484\n")], None,
     ["print(2 * int(input()) % 1000)", "print(2 * int(input()))"]),
    # right at once: never asked again
    ("neg", "Print -n.", [("3\n", "-3\n")], None, ["print(-int(input()))"]),
]  # fmt: skip
HIDDEN = ("1234 4321", "5555", "31337", "99999", "4242", "8484")


def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    rows = []
    for name, prompt, tests, public, _ in TASKS:
        row: dict[str, Any] = {
            "task_id": name,
            "prompt": prompt,
            "kind": "stdio",
            "tests": [{"stdin": i, "expected_stdout": o} for i, o in tests],
            "metadata": {"comparison": "whitespace", **({"public_tests": public} if public else {})},
        }
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scripted_model() -> FastAPI:
    """Answers each task's turn ``t`` (counted from the chat's length) with that task's answer of turn ``t``."""

    def answer(prompt: str, i: int) -> str:
        messages = app.state.requests[-1]["messages"]  # the request being answered
        turn = (len(messages) - 2) // 2 + 1  # system, task; then (answer, feedback) per turn before
        _, _, _, _, answers = next(t for t in TASKS if messages[1]["content"].startswith(t[1]))
        return f"Here it is.\n```python\n{answers[min(turn, len(answers)) - 1]}\n```"

    app = fake_openai_app(answer)
    return app


def config(tmp_path: Path, **kwargs: Any) -> RunConfig:
    settings: dict[str, Any] = {
        "dataset": "jsonl",
        "path": str(task_file(tmp_path)),
        "base_url": "http://model/v1",
        "model": "m",
        "turns": 3,
        "sandbox_url": [SANDBOX],
        "output": str(tmp_path / "out"),
    }
    return RunConfig(**{**settings, **kwargs})


def chats(app: FastAPI, task: str) -> list[list[dict[str, str]]]:
    prompt = next(t[1] for t in TASKS if t[0] == task)
    return [r["messages"] for r in app.state.requests if r["messages"][1]["content"].startswith(prompt)]


class HalfCharacter(httpx.AsyncBaseTransport):
    """The scripted model, whose code ends with half of a character (JSON's "\\ud83d", an endpoint's cut piece)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = httpx.ASGITransport(app=app)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.app.handle_async_request(request)
        body = (await response.aread()).replace(b'\\n```"', b'  # \\ud83d\\n```"')
        return httpx.Response(response.status_code, content=body, headers={"content-type": "application/json"})


async def test_an_answer_holding_half_a_character_is_asked_again_as_any(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    # Sent back in the chat of the next turn, it failed the request's encoding, and the whole run with it.
    app = scripted_model()
    run = config(tmp_path, public_tests=9)
    outcome = await run_evaluation(run, sandbox_transport=sandbox, model_transport=HalfCharacter(app))
    assert outcome.error is None and outcome.turns is not None
    assert [t.pass_at_1 for t in outcome.turns.by_turn] == [0.25, 0.75, 1.0]
    (_, second) = chats(app, "sum")
    assert second[2]["content"].endswith("print(a * b)  # \ufffd\ufffd\ufffd\n```")


async def test_feedback_on_public_tests_raises_pass_at_1_turn_by_turn(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    app = scripted_model()
    run = config(tmp_path, public_tests=9)  # more than any task has: each still keeps a hidden test
    outcome = await run_evaluation(run, sandbox_transport=sandbox, model_transport=httpx.ASGITransport(app=app))
    assert outcome.error is None and outcome.turns is not None
    assert outcome.summary.pass_at_k == {1: 0.25}  # the first answers' pass@k, as without --turns
    by_turn = [(t.turn, t.pass_at_1, t.known, t.asked, t.fixed) for t in outcome.turns.by_turn]
    assert by_turn == [(1, 0.25, 4, 0, 0), (2, 0.75, 4, 3, 2), (3, 1.0, 4, 1, 1)]
    assert outcome.turns.mean_turns_used == pytest.approx((2 + 3 + 2 + 1) / 4)

    # what the model read: its answer as the assistant, then the feedback on the public test as the user
    (first, second) = chats(app, "sum")
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[:2] == first and second[2]["content"].endswith(f"{READ}print(a * b)\n```")
    feedback = second[3]["content"]
    assert "0 of 1 tests passed." in feedback and "Test 1: WA (wrong answer)" in feedback
    assert "Input:\n1 2" in feedback and "Expected output:\n3" in feedback and "Actual output:\n2" in feedback
    *_, last = chats(app, "max")
    assert (
        len(last) == 6 and "All 1 tests passed." in last[3]["content"] and "All 1 tests passed." in last[5]["content"]
    )
    (_, double) = chats(app, "double")
    assert "All 1 tests passed." in double[3]["content"]  # the shown test passes; the failing one stays hidden
    assert len(chats(app, "neg")) == 1  # right at once: not asked again
    sent = json.dumps(app.state.requests)
    assert not [h for h in HIDDEN if h in sent]  # no hidden test's input or output reached the model

    out = tmp_path / "out"
    turns = sorted((r["task_id"], r["turn"], r["verdict"]) for r in lines(out / "results.jsonl"))
    assert turns == [
        ("double", 1, "WA"), ("double", 2, "AC"), ("max", 1, "WA"), ("max", 2, "WA"), ("max", 3, "AC"),
        ("neg", 1, "AC"), ("sum", 1, "WA"), ("sum", 2, "AC"),
    ]  # fmt: skip
    later = [r for r in lines(out / "completions.jsonl") if r["turn"] > 1]
    read = [m["content"] for r in app.state.requests for m in r["messages"] if m["role"] == "user"]
    assert len(later) == 4 and all(any(r["feedback"] in m for m in read) for r in later)  # kept as it was read
    assert json.loads((out / "run.json").read_text())["turns"] == 3

    write_report(out, outcome.summary, {"dataset": "jsonl", "public_tests": 9}, turns=outcome.turns)
    data = json.loads((out / "summary.json").read_text())
    assert [t["pass_at_1"] for t in data["turns"]["by_turn"]] == [0.25, 0.75, 1.0]
    assert data["turns"]["by_turn"][1]["fix_rate"] == pytest.approx(2 / 3)
    assert data["turns"]["feedback"] == {"tasks_shown_public_tests": 2, "tasks_shown_judging_tests": 2}
    report = (out / "report.md").read_text()
    assert "| 1 | 25.0% | 4 | - | - | - | 0 |" in report and "| 2 | 75.0% | 4 | 3 | 2 | 66.7% | 0 |" in report
    assert "| 3 | 100.0% | 4 | 1 | 1 | 100.0% | 0 |" in report and "![pass@1 by turn](pass_by_turn.png)" in report
    assert "showed the first 9 of the tests that also judge the answer, always leaving one hidden" in report
    assert (out / "pass_by_turn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = summary_table(outcome.summary, turns=outcome.turns)
    assert "after each turn of feedback:" in table and "\n3     100.0%  4 " in table


async def test_a_stopped_run_resumes_each_sample_at_its_missing_turn(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    app = scripted_model()
    run = config(tmp_path, model_concurrency=1, model_retries=0)
    flaky = Counting(httpx.ASGITransport(app=app), fail=True, serve_first=6)  # 4 first answers, 2 repairs
    stopped = await run_evaluation(run, sandbox_transport=sandbox, model_transport=flaky)
    assert stopped.error is not None and "ConnectError" in stopped.error
    assert stopped.turns is not None and stopped.turns.by_turn[2].asked == 0  # turn 3 was never reached
    kept = lines(tmp_path / "out" / "results.jsonl")
    assert len([r for r in kept if r["turn"] == 2]) == 2

    up = Counting(httpx.ASGITransport(app=app))
    resumed = await run_evaluation(run, sandbox_transport=sandbox, model_transport=up)
    assert resumed.error is None and up.calls == 2  # only the two answers the first run did not get
    assert resumed.turns is not None
    assert [t.pass_at_1 for t in resumed.turns.by_turn] == [0.25, 0.75, 1.0]
    (*_, last) = chats(app, "max")
    assert len(last) == 6  # its turn-3 chat was rebuilt from the stored answers and feedback
    again, judge = Counting(httpx.ASGITransport(app=app)), Counting(sandbox)
    await run_evaluation(run, sandbox_transport=judge, model_transport=again)
    assert again.calls == 0 and judge.calls == 0  # every turn judged: nothing is asked or judged again


async def test_turns_need_a_model_and_the_chat_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "neg", "completion": "print(-int(input()))"}) + "\n")
    argv = ["run", "--dataset", "jsonl", "--path", str(task_file(tmp_path)), "--samples", str(samples)]
    assert main([*argv, "--turns", "2", "--output", str(tmp_path / "out")]) == 2
    assert "--turns needs a model to answer the feedback" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything started
    for flag in ("--public-tests", "--feedback-tests"):  # the setting's name, and its name before
        assert main([*argv, flag, "-1", "--output", str(tmp_path / "out")]) == 2
        assert "--public-tests must be at least 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--turns needs --api chat"):
        await run_evaluation(config(tmp_path, api="completion"))


def test_a_sample_not_asked_again_stays_wrong_in_later_turns() -> None:
    # Wrong answers whose task shows no test (or whose feedback could not run) are never asked again: they have
    # no row at later turns, and must not drop out of pass@1 there (it would rise with no repair at all).
    tests = [{"stdin": "1", "expected_stdout": "1"}, {"stdin": "2", "expected_stdout": "2"}]
    tasks = [Task("t", "", "stdio", tests), Task("u", "", "stdio", tests)]
    rows = {("t", 0, 1): {"verdict": "AC"}, ("u", 1, 1): {"verdict": "SE"}}
    rows |= {("t", i, 1): {"verdict": "WA"} for i in (1, 2, 3)} | {("u", 0, 1): {"verdict": "WA"}}
    rows |= {("t", 1, 2): {"verdict": "AC"}}  # one of t's was asked again, and fixed
    by_turn = turns_summary(tasks, rows, 3).by_turn
    assert [t.pass_at_1 for t in by_turn] == [0.125, 0.25, 0.25]  # t: 1/4 then 2/4; u: 0/1 (its SE left out)
    assert [t.known for t in by_turn] == [5, 5, 5]
