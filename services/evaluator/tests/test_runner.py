"""Evaluation runs end to end: samples files and model endpoints, results on disk, resuming, reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.config import RunConfig
from codegym_evaluator.report import summary_table, write_report
from codegym_evaluator.runner import run_evaluation
from codegym_evaluator.tasks import load_tasks

from .fake_openai import fake_openai_app

pytestmark = pytest.mark.anyio
SANDBOX = "http://sandbox"
TASKS = load_tasks("humaneval", limit=4)
CANONICAL = {t.task_id: t.metadata["canonical_solution"] for t in TASKS}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def samples_file(tmp_path: Path) -> Path:
    path = tmp_path / "samples.jsonl"
    rows = [{"task_id": t.task_id, "completion": CANONICAL[t.task_id]} for t in TASKS]
    rows += [{"task_id": t.task_id, "completion": "    return None\n"} for t in TASKS[:2]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Counting(httpx.AsyncBaseTransport):
    """Forwards to ``inner`` and counts requests; ``fail`` makes it refuse connections instead."""

    def __init__(self, inner: httpx.AsyncBaseTransport, fail: bool = False, serve_first: int = 0) -> None:
        self.inner, self.fail, self.serve_first, self.calls = inner, fail, serve_first, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.fail and self.calls > self.serve_first:
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


async def test_a_samples_file_run_writes_results_summary_and_report(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    out = tmp_path / "out"
    config = RunConfig(
        dataset="humaneval",
        limit=4,
        samples=str(samples_file(tmp_path)),
        sandbox_url=[SANDBOX],
        output=str(out),
        k=[1, 2],
    )
    seen: list[tuple[int, int]] = []
    outcome = await run_evaluation(config, sandbox_transport=sandbox, progress=lambda d, t: seen.append((d, t)))
    assert outcome.error is None
    summary = outcome.summary
    # tasks 0, 1: one right of two (pass@1 0.5, pass@2 1); tasks 2, 3: one right of one (no pass@2)
    assert summary.pass_at_k == {1: pytest.approx(0.75), 2: 1.0}
    assert summary.verdict_counts == {"AC": 4, "WA": 2}
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    rows = lines(out / "results.jsonl")
    assert len(rows) == 6
    row = next(r for r in rows if r["task_id"] == "HumanEval/0" and r["sample"] == 1)
    assert row["verdict"] == "WA" and row["test_verdicts"] == ["WA"] and row["completion"] == "    return None\n"
    assert row["wall_s"] > 0 and row["code"] == "    return None\n"

    report = write_report(out, summary, {"dataset": "humaneval"})
    data = json.loads((out / "summary.json").read_text())
    assert data["pass_at_k"] == {"pass@1": 0.75, "pass@2": 1.0} and data["sandbox_errors"] == 0
    assert len(data["per_task"]) == 4
    text = report.read_text()
    assert "| pass@1 | 75.0% |" in text and "![pass rates](pass_rates.png)" in text
    assert (out / "pass_rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = summary_table(summary, "t")
    assert "pass@2  100.0%" in table and "verdicts: AC 4, WA 2" in table


async def test_sandbox_errors_are_reported_apart_and_redone_on_resume(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    config = RunConfig(
        dataset="humaneval",
        limit=4,
        samples=str(samples_file(tmp_path)),
        sandbox_url=[SANDBOX],
        output=str(tmp_path / "out"),
        retries=0,
    )
    down = Counting(sandbox, fail=True)
    first = await run_evaluation(config, sandbox_transport=down)
    assert first.summary.sandbox_errors == 6 and first.summary.pass_at_k == {}
    assert first.summary.verdict_counts == {"SE": 6}
    assert "sandbox errors: 6 samples were not judged" in summary_table(first.summary)

    second = await run_evaluation(config, sandbox_transport=sandbox)
    assert second.summary.sandbox_errors == 0 and second.summary.pass_at_k == {1: pytest.approx(0.75)}

    again = Counting(sandbox)
    third = await run_evaluation(config, sandbox_transport=again)
    assert again.calls == 0  # everything was judged: nothing is sent again
    assert third.summary.pass_at_k == second.summary.pass_at_k


async def test_a_changed_run_is_not_resumed_into_the_same_directory(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    config = RunConfig(
        dataset="humaneval",
        limit=1,
        samples=str(samples_file(tmp_path)),
        sandbox_url=[SANDBOX],
        output=str(tmp_path / "out"),
    )
    await run_evaluation(config, sandbox_transport=sandbox)
    config.extract = "none"
    with pytest.raises(ValueError, match=r"holds another run \(extract: 'last'\)"):
        await run_evaluation(config, sandbox_transport=sandbox)


def chat_answer(prompt: str, i: int) -> str:
    """The canonical solution as a chat model would answer (a full function in a fenced block)."""
    task = next(t for t in TASKS if t.prompt.rstrip() in prompt)
    return f"Sure.\n```python\n{task.prompt}{CANONICAL[task.task_id]}\n```\nDone." if i == 0 else "no idea"


async def test_a_model_run_through_an_openai_compatible_endpoint(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    app = fake_openai_app(chat_answer)
    config = RunConfig(
        dataset="humaneval",
        limit=4,
        base_url="http://model/v1",
        n=2,
        temperature=0.8,
        k=[1, 2],
        sandbox_url=[SANDBOX],
        output=str(tmp_path / "out"),
    )
    outcome = await run_evaluation(config, sandbox_transport=sandbox, model_transport=httpx.ASGITransport(app=app))
    assert outcome.error is None
    assert outcome.summary.pass_at_k == {1: 0.5, 2: 1.0}
    assert all(r["model"] == "fake-coder" for r in app.state.requests)  # the first model the endpoint lists
    assert len(lines(tmp_path / "out" / "completions.jsonl")) == 8
    rows = lines(tmp_path / "out" / "results.jsonl")
    assert {r["verdict"] for r in rows if r["sample"] == 0} == {"AC"}
    assert all(r["fenced"] for r in rows if r["sample"] == 0)


async def test_base_models_continue_the_prompt_and_stop(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    def continuation(prompt: str, i: int) -> str:
        task = next(t for t in TASKS if t.prompt == prompt)
        return CANONICAL[task.task_id] + "\n\ndef unrelated():\n    pass\nprint(unrelated())\n"

    app = fake_openai_app(continuation)
    config = RunConfig(
        dataset="humaneval",
        limit=4,
        base_url="http://model/v1",
        model="base",
        api="completion",
        sandbox_url=[SANDBOX],
        output=str(tmp_path / "out"),
    )
    outcome = await run_evaluation(config, sandbox_transport=sandbox, model_transport=httpx.ASGITransport(app=app))
    assert outcome.summary.pass_at_k == {1: 1.0}
    rows = lines(tmp_path / "out" / "results.jsonl")
    assert all("unrelated" not in r["completion"] for r in rows)  # cut at the stop sequence


async def test_an_endpoint_that_goes_down_keeps_partial_results_and_resumes(
    tmp_path: Path, sandbox: httpx.ASGITransport
) -> None:
    app = fake_openai_app(chat_answer)
    config = RunConfig(
        dataset="humaneval",
        limit=4,
        base_url="http://model/v1",
        model="m",
        model_concurrency=1,
        model_retries=1,
        sandbox_url=[SANDBOX],
        output=str(tmp_path / "out"),
    )
    flaky = Counting(httpx.ASGITransport(app=app), fail=True, serve_first=1)
    outcome = await run_evaluation(config, sandbox_transport=sandbox, model_transport=flaky)
    assert outcome.error is not None and "failed after 2 attempts: ConnectError: connection refused" in outcome.error
    assert len(outcome.summary.per_task) == 1  # the task answered before the endpoint went down
    kept = lines(tmp_path / "out" / "results.jsonl")
    assert [r["task_id"] for r in kept] == ["HumanEval/0"]

    up = Counting(httpx.ASGITransport(app=app))
    resumed = await run_evaluation(config, sandbox_transport=sandbox, model_transport=up)
    assert resumed.error is None and resumed.summary.pass_at_k == {1: 1.0}
    assert up.calls == 3  # only the three tasks without completions were asked again
