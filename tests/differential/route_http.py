"""What every route driver shares: the verdict type, the HTTP client and its retries, an item's limit and rule."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import httpx
from codegym_evaluator.tasks.rules import rule
from codegym_sandbox.judging.compare import Comparison, outputs_match

from .corpus import Item, call_cases, stdio_cases

Verdict = bool | None
Driver = Callable[[str, list[Item]], Coroutine[Any, Any, dict[str, Verdict]]]
TIMEOUT_S = 10.0
FUSION_LANGUAGES = {"python", "cpp", "nodejs", "bash"}  # of the corpus's: SandboxFusion has no plain "c"
CONCURRENCY = 8


def limit(item: Item) -> float:
    """The item's time limit per run, as every route sends it."""
    return item.timeout_s or TIMEOUT_S


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0))


async def post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST, tried again (up to 3 times, 1 s apart) when the server says it is busy (429, 502-504), as the
    clients of these routes do: a busy server is not a verdict."""
    for _ in range(3):
        r = await http.post(path, json=body)
        if r.status_code not in (429, 502, 503, 504):
            break
        await asyncio.sleep(1.0)
    return r


async def bounded(jobs: list[Awaitable[None]]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Awaitable[None]) -> None:
        async with gate:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


def judge_metadata(item: Item) -> dict[str, str | float]:
    """How the item's task compares, as its task's metadata says it (``tasks.rules``; a codegym task's own)."""
    meta = rule(item.dataset).metadata() if item.dataset != "codegym" else {}
    return {**meta, "comparison": item.comparison} if item.comparison else meta


def comparison(item: Item) -> Comparison:
    """How the item's outputs compare, for the clients that compare them themselves."""
    return Comparison(judge_metadata(item).get("comparison", "exact"))


def same_output(item: Item, got: str, expected: str) -> bool:
    """Whether ``got`` is ``expected`` by the item's comparison and tolerances, for the clients that compare
    outputs themselves."""
    tolerances = rule(item.dataset).tolerances() if item.dataset != "codegym" else {}
    return outputs_match(got, expected, comparison(item), **tolerances)


def lcb_row(item: Item) -> dict[str, Any]:
    """The item's stdin task as a row of LiveCodeBench (``public_test_cases`` as JSON)."""
    cases = [{"input": i, "output": o, "testtype": "stdin"} for i, o in stdio_cases(item.task)]
    return {"question_id": item.task.name, "question_content": item.task.doc, "public_test_cases": json.dumps(cases)}


def apps_row(item: Item) -> dict[str, Any]:
    """The item's task as a row of APPS (``input_output``; a call's expected value wrapped in a list)."""
    if item.form == "stdio":
        cases = stdio_cases(item.task)
        io: dict[str, Any] = {"inputs": [i for i, _ in cases], "outputs": [o for _, o in cases]}
    else:
        calls = call_cases(item.task)
        io = {"fn_name": item.task.entry, "inputs": [a for a, _ in calls], "outputs": [[e] for _, e in calls]}
    return {"id": item.task.name, "question": item.task.doc, "input_output": json.dumps(io)}
