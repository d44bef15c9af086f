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
- ``/run_jupyter``: the same script as a notebook's one cell, its result the cell's display (both in
  ``route_scripts.py``; the script imports its summary after the program ran, as reward scripts do);
- ``CodeReward`` (``services/evaluator/.../trl_reward.py``) with ``api="native"`` and ``api="fusion"``: the
  whole corpus in one call each, its tests in the dataset columns it reads (``route_rewards.py``); a row whose
  prompt shows every test that judges it is masked by the reward (as for training) and left out;
- ``Scorer``: the evaluator's own path for a model's answer to a function task (``Scorer.score_group``, which
  extracts the code and sanitises it before ``/v1/evaluate``), for the call and assert forms.

An item's time limit is its own (``Item.timeout_s``) or ``TIMEOUT_S``; an item judged twice (``Item.repeat``)
goes with the routes' caches on, as their clients send by default.

An item of APPS, LiveCodeBench or open-r1 (``Item.dataset``) goes to each route in that dataset's format (an APPS
or LiveCodeBench row, open-r1's columns) and is compared by that dataset's rule; where a route's client compares
outputs itself (``/run_code``, the open-r1 scripts), it compares by the same rule and tolerances. An item whose
verdict depends on its rule (``Item.bound``) is judged only by the routes that can say its dataset.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from codegym_evaluator.scoring import Scorer, evaluate_body
from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.apps import APPSAdapter
from codegym_evaluator.tasks.humaneval import HumanEvalAdapter
from codegym_evaluator.tasks.livecodebench import LiveCodeBenchAdapter

from .corpus import Item, call_cases, stdio_cases
from .route_http import (
    CONCURRENCY,
    FUSION_LANGUAGES,
    Driver,
    Verdict,
    apps_row,
    bounded,
    client,
    judge_metadata,
    lcb_row,
    limit,
    post,
    same_output,
)
from .route_rewards import code_reward
from .route_scripts import execute_batch, run_jupyter


def native_tests(item: Item) -> list[dict[str, Any]]:
    """The stdin or call item's tests as bodies of ``/v1/evaluate``'s ``Test``."""
    if item.form == "stdio":
        return [{"stdin": i, "expected_stdout": o} for i, o in stdio_cases(item.task)]
    return [{"call": a, "expected": e} for a, e in call_cases(item.task)]


def library_task(item: Item) -> Task:
    """The item's task as codegym's task library has it (HumanEval's adapter for the assert form, APPS's or
    LiveCodeBench's for an item of theirs)."""
    if item.dataset in ("apps", "livecodebench"):
        adapter = APPSAdapter() if item.dataset == "apps" else LiveCodeBenchAdapter()
        task = adapter.to_task(apps_row(item) if item.dataset == "apps" else lcb_row(item), 0)
        assert task is not None
        return task
    row = submit_row(item)
    return HumanEvalAdapter().to_task(row, 0) if item.form == "assert" else Task(**row)


def _group_key(i: Item) -> tuple[str, str, str, str, str, float, bool]:
    """Items judged in one request: the same task, tests, language, limit and cache."""
    return (i.task.name, i.form, i.language, i.dataset, i.comparison or "", limit(i), i.repeat)


def _groups(items: list[Item]) -> list[list[Item]]:
    return [list(g) for _, g in groupby(sorted(items, key=_group_key), key=_group_key)]


async def evaluate(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/v1/evaluate``: a request per group of items that share their tests, the body made by the evaluator's
    ``evaluate_body`` (as its ``Scorer`` sends it)."""
    out: dict[str, Verdict] = {}

    async with client(url) as http:

        async def group(members: list[Item]) -> None:
            first = members[0]
            body = evaluate_body(
                library_task(first), [m.program for m in members], timeout_s=limit(first), cache=first.repeat
            )
            r = await post(http, "/v1/evaluate", body)
            if r.status_code != 200:
                out.update({m.id: None for m in members})
                return
            for m, result in zip(members, r.json()["results"], strict=True):
                se = any(t["verdict"] == "SE" for t in result["tests"])
                out[m.id] = None if se else result["verdict"] == "AC"

        await bounded([group(g) for g in _groups(items)])
    return out


async def run_code(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/run_code`` per stdin test, as verl's ``sandbox_fusion`` reward judges stdin problems."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if i.form == "stdio" and i.language in FUSION_LANGUAGES]
    async with client(url) as http:

        async def one(item: Item) -> None:
            verdict: Verdict = True
            for stdin, expected in stdio_cases(item.task):
                body = {"code": item.program, "language": item.language, "stdin": stdin, "run_timeout": limit(item)}
                r = await post(http, "/run_code", body)
                answer: dict[str, Any] = r.json() if r.status_code == 200 else {"status": "SandboxError"}
                if answer["status"] == "SandboxError":
                    verdict = None
                    break
                run = answer.get("run_result") or {}
                if answer["status"] != "Success" or not same_output(item, run.get("stdout") or "", expected):
                    verdict = False
                    break
            out[item.id] = verdict

        await bounded([one(i) for i in chosen])
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
    async with client(url) as http:

        async def one(item: Item) -> None:
            completion = item.fenced if item.form == "stdio" or item.dataset == "apps" else item.completion
            config = {"provided_data": submit_row(item), "run_timeout": limit(item), "extra": {"run_all_cases": True}}
            dataset, id_ = (
                ("apps", f"APPS/{item.task.name}") if item.dataset == "apps" else ("humaneval", item.task.name)
            )
            r = await post(http, "/submit", {"dataset": dataset, "id": id_, "completion": completion, "config": config})
            if r.status_code != 200:
                out[item.id] = None
                return
            answer = r.json()
            out[item.id] = None if answer["extra"]["verdict"] == "SE" else bool(answer["accepted"])

        await bounded([one(i) for i in items])
    return out


async def scorer(url: str, items: list[Item]) -> dict[str, Verdict]:
    """The evaluator's ``Scorer`` on the call and assert items: each answer's code extracted and sanitised (what
    a reference harness would not run goes, the set-up a right answer needs stays), one group per task."""
    out: dict[str, Verdict] = {}

    async def group(members: list[Item]) -> None:
        first = members[0]
        async with Scorer(url, timeout_per_test=limit(first), cache=first.repeat, concurrency=CONCURRENCY) as judge:
            scores = await judge.score_group(library_task(first), [m.completion for m in members])
        for m, score in zip(members, scores, strict=True):
            out[m.id] = None if score.sandbox_error or "SE" in score.test_verdicts else score.verdict == "AC"

    await bounded([group(g) for g in _groups([i for i in items if i.form != "stdio"])])
    return out


ROUTES: dict[str, Driver] = {
    "/v1/evaluate": evaluate,
    "/run_code": run_code,
    "/submit": submit,
    "/execute_batch": execute_batch,
    "/run_jupyter": run_jupyter,
    "CodeReward native": code_reward("native"),
    "CodeReward fusion": code_reward("fusion"),
    "Scorer": scorer,
}
