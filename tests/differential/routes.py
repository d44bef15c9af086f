"""Route drivers: the corpus judged by a codegym sandbox server through every route that can express an item.

Each driver takes the items and the server's URL and gives, per item it can judge, ``True`` (passed every
test), ``False`` or ``None`` (not judged: the sandbox answered SE, or the route failed):

- ``/v1/evaluate``: one request per task, form and language, every completion of the group in it (stdin,
  call and assert tests), the body as the evaluator makes it (``evaluate_body``: for the assert form, the task
  as the HumanEval adapter reads a row, its ``check`` then ``check(entry)``);
- ``/run_code``: verl's ``sandbox_fusion`` way for stdin tests, one request per test, stdout compared exactly;
- ``/submit``: SandboxFusion's online-judge route, one item per request with its task in ``provided_data``
  (a HumanEval row for the assert form, a codegym task for the others), every case run;
- ``/execute_batch``: open-r1's routed code reward for Python stdin programs, a script per program that runs
  it on each case in a subprocess and ends with the pass rate, which the route gives back as the cell's result;
- ``/run_jupyter``: the same script as a notebook's one cell, its result the cell's display;
- ``CodeReward`` (``services/evaluator/.../trl_reward.py``) with ``api="native"`` and ``api="fusion"``: the
  whole corpus in one call each, its tests in the dataset columns it reads.

An item of APPS or open-r1 (``Item.dataset``) goes to each route in that dataset's format (an APPS row, open-r1's
columns) and is compared by that dataset's rule; where a route's client compares outputs itself (``/run_code``,
the open-r1 scripts), it compares by the same rule. An item whose verdict depends on its rule (``Item.bound``)
is judged only by the routes that can say its dataset.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from itertools import groupby
from typing import Any

import httpx
from codegym_evaluator.scoring import evaluate_body
from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.apps import APPSAdapter
from codegym_evaluator.tasks.humaneval import HumanEvalAdapter
from codegym_evaluator.tasks.rules import rule
from codegym_evaluator.trl_reward import CodeReward
from codegym_sandbox.judging.compare import Comparison, outputs_match

from .corpus import Item, call_cases, stdio_cases

Verdict = bool | None
Driver = Callable[[str, list[Item]], Coroutine[Any, Any, dict[str, Verdict]]]
TIMEOUT_S = 10.0
FUSION_LANGUAGES = {"python", "cpp", "nodejs", "bash"}  # of the corpus's: SandboxFusion has no plain "c"
CONCURRENCY = 8


def native_tests(item: Item) -> list[dict[str, Any]]:
    """The stdin or call item's tests as bodies of ``/v1/evaluate``'s ``Test``."""
    if item.form == "stdio":
        return [{"stdin": i, "expected_stdout": o} for i, o in stdio_cases(item.task)]
    return [{"call": a, "expected": e} for a, e in call_cases(item.task)]


def _client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0, connect=10.0))


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST, tried again (up to 3 times, 1 s apart) when the server says it is busy (429, 502-504), as the
    clients of these routes do: a busy server is not a verdict."""
    for _ in range(3):
        r = await http.post(path, json=body)
        if r.status_code not in (429, 502, 503, 504):
            break
        await asyncio.sleep(1.0)
    return r


async def _bounded(jobs: list[Awaitable[None]]) -> None:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Awaitable[None]) -> None:
        async with limit:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


def judge_metadata(item: Item) -> dict[str, str]:
    """How the item's task compares, as its task's metadata says it (``tasks.rules``; a codegym task's own)."""
    meta = rule(item.dataset).metadata() if item.dataset != "codegym" else {}
    return {**meta, "comparison": item.comparison} if item.comparison else meta


def comparison(item: Item) -> Comparison:
    """How the item's outputs compare, for the clients that compare them themselves."""
    return Comparison(judge_metadata(item).get("comparison", "exact"))


def apps_row(item: Item) -> dict[str, Any]:
    """The item's task as a row of APPS (``input_output``; a call's expected value wrapped in a list)."""
    if item.form == "stdio":
        cases = stdio_cases(item.task)
        io: dict[str, Any] = {"inputs": [i for i, _ in cases], "outputs": [o for _, o in cases]}
    else:
        calls = call_cases(item.task)
        io = {"fn_name": item.task.entry, "inputs": [a for a, _ in calls], "outputs": [[e] for _, e in calls]}
    return {"id": item.task.name, "question": item.task.doc, "input_output": json.dumps(io)}


def library_task(item: Item) -> Task:
    """The item's task as codegym's task library has it (HumanEval's adapter for the assert form, APPS's for
    an APPS item)."""
    if item.dataset == "apps":
        task = APPSAdapter().to_task(apps_row(item), 0)
        assert task is not None
        return task
    row = submit_row(item)
    return HumanEvalAdapter().to_task(row, 0) if item.form == "assert" else Task(**row)


async def evaluate(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/v1/evaluate``: a request per group of items that share their tests, the body made by the evaluator's
    ``evaluate_body`` (as its ``Scorer`` sends it)."""
    out: dict[str, Verdict] = {}

    def key(i: Item) -> tuple[str, str, str, str, str]:
        return (i.task.name, i.form, i.language, i.dataset, i.comparison or "")

    async with _client(url) as http:

        async def group(members: list[Item]) -> None:
            body = evaluate_body(library_task(members[0]), [m.program for m in members], timeout_s=TIMEOUT_S)
            body["cache"] = False
            r = await _post(http, "/v1/evaluate", body)
            if r.status_code != 200:
                out.update({m.id: None for m in members})
                return
            for m, result in zip(members, r.json()["results"], strict=True):
                se = any(t["verdict"] == "SE" for t in result["tests"])
                out[m.id] = None if se else result["verdict"] == "AC"

        groups = [list(g) for _, g in groupby(sorted(items, key=key), key=key)]
        await _bounded([group(g) for g in groups])
    return out


async def run_code(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/run_code`` per stdin test, as verl's ``sandbox_fusion`` reward judges stdin problems."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if i.form == "stdio" and i.language in FUSION_LANGUAGES]
    async with _client(url) as http:

        async def one(item: Item) -> None:
            verdict: Verdict = True
            for stdin, expected in stdio_cases(item.task):
                body = {"code": item.program, "language": item.language, "stdin": stdin, "run_timeout": TIMEOUT_S}
                r = await _post(http, "/run_code", body)
                answer: dict[str, Any] = r.json() if r.status_code == 200 else {"status": "SandboxError"}
                if answer["status"] == "SandboxError":
                    verdict = None
                    break
                run = answer.get("run_result") or {}
                if answer["status"] != "Success" or not outputs_match(
                    run.get("stdout") or "", expected, comparison(item)
                ):
                    verdict = False
                    break
            out[item.id] = verdict

        await _bounded([one(i) for i in chosen])
    return out


def submit_row(item: Item) -> dict[str, Any]:
    """The task as ``/submit``'s ``config.provided_data``: a HumanEval row, an APPS row, or a codegym task."""
    task = item.task
    if item.dataset == "apps":
        return apps_row(item)
    if item.form == "assert":
        return {
            "task_id": task.name,
            "prompt": task.starter,
            "test": task.check_source(),
            "entry_point": task.entry,
            "canonical_solution": "",
        }
    row: dict[str, Any] = {
        "task_id": task.name,
        "prompt": task.doc,
        "kind": item.form,
        "tests": native_tests(item),
        "language": item.language,
        "metadata": judge_metadata(item),
    }
    if item.form == "call":
        row.update(entry_point=task.entry, starter_code=task.starter)
    return row


async def submit(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/submit`` per item, every case run (``run_all_cases``)."""
    out: dict[str, Verdict] = {}
    async with _client(url) as http:

        async def one(item: Item) -> None:
            completion = item.fenced if item.form == "stdio" or item.dataset == "apps" else item.completion
            config = {"provided_data": submit_row(item), "run_timeout": TIMEOUT_S, "extra": {"run_all_cases": True}}
            dataset, id_ = (
                ("apps", f"APPS/{item.task.name}") if item.dataset == "apps" else ("humaneval", item.task.name)
            )
            r = await _post(
                http, "/submit", {"dataset": dataset, "id": id_, "completion": completion, "config": config}
            )
            if r.status_code != 200:
                out[item.id] = None
                return
            answer = r.json()
            out[item.id] = None if answer["extra"]["verdict"] == "SE" else bool(answer["accepted"])

        await _bounded([one(i) for i in items])
    return out


OPEN_R1_SCRIPT = """\
import json
import subprocess


def evaluate_code(code, test_cases):
    passed = 0
    for case in test_cases:
        try:
            process = subprocess.run(["python3", "-c", code], input=case["input"], text=True, capture_output=True,
                                     timeout={timeout})
        except subprocess.TimeoutExpired:
            continue
        if process.returncode != 0:
            continue
        if {same}:
            passed += 1
    return passed / len(test_cases)


code_snippet = {code!r}
test_cases = json.loads({cases!r})
evaluate_code(code_snippet, test_cases)
"""


# How the script compares, by the item's rule (open-r1 itself strips lines and zips them, which drops lines).
SAME = {
    Comparison.EXACT: 'process.stdout.rstrip("\\n") == case["output"].rstrip("\\n")',
    Comparison.WHITESPACE: 'process.stdout.split() == case["output"].split()',
}


def open_r1_script(item: Item) -> str:
    """open-r1's ``code_reward`` script for one program, comparing by the item's rule."""
    cases = json.dumps([{"input": i, "output": o} for i, o in stdio_cases(item.task)])
    same = SAME[comparison(item)]
    return OPEN_R1_SCRIPT.format(code=item.program, cases=cases, timeout=TIMEOUT_S, same=same)


def scripted(item: Item) -> bool:
    """A Python stdin item the open-r1 script can judge (its comparison is one the script makes)."""
    return item.form == "stdio" and item.language == "python" and comparison(item) in SAME


async def execute_batch(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/execute_batch`` for the Python stdin programs, in batches of 32 scripts, as open-r1's routers send."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if scripted(i)]
    async with _client(url) as http:

        async def batch(members: list[Item]) -> None:
            body = {"scripts": [open_r1_script(m) for m in members], "languages": ["python"], "timeout": 30}
            r = await _post(http, "/execute_batch", body)
            answers = r.json() if r.status_code == 200 else [{"execution": None}] * len(members)
            for m, answer in zip(members, answers, strict=True):
                if answer["execution"] is None:
                    out[m.id] = None
                    continue
                try:
                    out[m.id] = float(answer["text"]) == 1.0
                except (TypeError, ValueError):
                    out[m.id] = False

        await _bounded([batch(chosen[i : i + 32]) for i in range(0, len(chosen), 32)])
    return out


async def run_jupyter(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/run_jupyter`` for the Python stdin programs: open-r1's script as the one cell of a notebook, its
    result the cell's display (``text/plain``), as a notebook-based reward reads it."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if scripted(i)]
    async with _client(url) as http:

        async def one(item: Item) -> None:
            r = await _post(http, "/run_jupyter", {"cells": [open_r1_script(item)], "total_timeout": 30})
            answer: dict[str, Any] = r.json() if r.status_code == 200 else {"status": "SandboxError"}
            if answer["status"] == "SandboxError":
                out[item.id] = None
                return
            shown = [d.get("text/plain") for c in answer.get("cells") or [] for d in c.get("display") or []]
            out[item.id] = answer["status"] == "Success" and shown[-1:] == ["1.0"]

        await _bounded([one(i) for i in chosen])
    return out


def reward_columns(items: list[Item]) -> dict[str, list[Any]]:
    """TRL's dataset columns for ``CodeReward``: ``verification_info`` (stdin and call tests, open-r1's format),
    APPS's ``input_output`` for an APPS item, or HumanEval's ``tests`` with ``entry_point``, one row per
    completion."""
    info: list[Any] = []
    io: list[Any] = []
    tests: list[Any] = []
    entry: list[Any] = []
    for item in items:
        if item.dataset == "apps":
            info.append(None)
            io.append(apps_row(item)["input_output"])
        elif item.form == "stdio":
            cases = [{"input": i, "output": o} for i, o in stdio_cases(item.task)]
            info.append({"language": item.language, "test_cases": cases})
            io.append(None)
        elif item.form == "call":
            cases = [{"input": json.dumps(a), "output": json.dumps(e)} for a, e in call_cases(item.task)]
            info.append({"language": "python", "fn_name": item.task.entry, "test_cases": cases})
            io.append(None)
        else:
            info.append(None)
            io.append(None)
        tests.append(item.task.check_source() if item.form == "assert" else None)
        entry.append(item.task.entry if item.form == "assert" else None)
    return {
        "verification_info": info,
        "input_output": io,
        "tests": tests,
        "entry_point": entry,
        "language": [i.language for i in items],
    }


def rewarded(item: Item, api: str) -> bool:
    """An item ``CodeReward`` can judge: open-r1's and APPS's items in their columns, codegym's own in open-r1's
    where its verdict is the same under either rule (not ``bound``); a plain fusion server lacks plain C."""
    expressible = item.dataset in ("apps", "open-r1") or not item.bound
    return expressible and (api == "native" or item.language in FUSION_LANGUAGES)


def code_reward(api: str) -> Driver:
    """``CodeReward(api=...)`` on every item at once; passed when the reward is 1.0 (all tests)."""

    async def drive(url: str, items: list[Item]) -> dict[str, Verdict]:
        chosen = [i for i in items if rewarded(i, api)]
        reward = CodeReward(url, api=api, timeout_s=TIMEOUT_S, concurrency=CONCURRENCY)  # type: ignore[arg-type]
        # The prompt as TRL gives it: the text the completion follows (its helpers are the tests' own).
        prompts = [i.task.starter if i.form != "stdio" else "" for i in chosen]
        scores = await asyncio.to_thread(reward, prompts, [i.fenced for i in chosen], **reward_columns(chosen))
        return {i.id: None if s is None else s == 1.0 for i, s in zip(chosen, scores, strict=True)}

    return drive


ROUTES: dict[str, Driver] = {
    "/v1/evaluate": evaluate,
    "/run_code": run_code,
    "/submit": submit,
    "/execute_batch": execute_batch,
    "/run_jupyter": run_jupyter,
    "CodeReward native": code_reward("native"),
    "CodeReward fusion": code_reward("fusion"),
}
