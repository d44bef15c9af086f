"""SandboxFusion's dataset ("online judge") routes, served from codegym's task library.

The ``sandbox-fusion`` client's ``get_prompts``, ``get_prompt_by_id``, ``submit`` and ``submit_safe`` (and the
routes it never calls, ``list_datasets`` and ``list_ids``) work against these, in upstream's shapes:

- ``dataset`` is a codegym dataset name (``humaneval``, ``mbpp``, ``apps``, ``code_contests``,
  ``livecodebench``, ...) or one of upstream's ids for the same data (``humaneval_python``,
  ``live_code_bench_v1``). ``config.provided_data`` replaces the lookup, as upstream: rows of that dataset
  (a list for ``get_prompts``/``list_ids``, one row for ``submit``/``get_prompt_by_id``), or codegym tasks.
- A ``Prompt`` is ``{id: task_id, prompt: the task's prompt, labels: {kind, entry_point, language, ...}}``.
- ``submit`` extracts the code from the completion as the evaluator does, runs it on every test of the task
  through the sandbox (``/v1/evaluate``; ``config.run_timeout`` per test, 10 s by default; it stops at the
  first failure unless ``config.extra.run_all_cases``) and answers an ``EvalResult`` with one
  ``EvalTestCase`` per test run.

:func:`make_router` takes how to reach the sandbox: the evaluator's service passes its sandbox URL, the
sandbox server itself passes a transport to its own app.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Annotated, Any, Protocol, TypeVar

from codegym_sandbox.backends.base import MemoryShare
from codegym_sandbox.backends.memory import MemoryBudget, default_budget_mb
from codegym_sandbox.client import AsyncSandboxClient, SandboxError
from codegym_sandbox.judging import off_loop
from codegym_sandbox.models import at_most
from codegym_sandbox.quoting import cut
from codegym_sandbox.verdicts import Verdict
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from . import fusion_answers, python_syntax
from .extract import Extracted, extract_code
from .scoring import build_program, evaluate_body
from .tasks import Task, load_tasks
from .tasks.registry import DATASETS
from .tasks.sources import DatasetError

T = TypeVar("T")
# A prompt as the list routes answer it (see the module's docstring).
Prompt = dict[str, Any]


class Analyse(Protocol):
    """How a route works on a text its request sent (``/submit``'s completion: its code extracted and sanitised,
    a parse and walks of it): ``fn(text)``, off the event loop. Made on the loop, one completion of a MiB held
    every client's requests for 7 s, and one of 18 MB the server's whole memory (round 57)."""

    def __call__(
        self,
        request: Request,
        fn: Callable[[str], T],
        text: str,
        held_mb: int | None = None,
        chars: int | None = None,
        *,
        linear: bool = True,
    ) -> Awaitable[T]: ...


def in_pool(memory: Callable[[Request], MemoryShare]) -> Analyse:
    """:class:`Analyse` in the sandbox's pool of processes for such work (``off_loop.analysed``): in the turn of
    the request's client (its address), charged to ``memory(request)``."""

    def analyse(
        request: Request,
        fn: Callable[[str], T],
        text: str,
        held_mb: int | None = None,
        chars: int | None = None,
        *,
        linear: bool = True,
    ) -> Awaitable[T]:
        client = request.client.host if request.client else ""
        return off_loop.analysed(memory(request), client, fn, text, held_mb, chars, linear=linear)

    return analyse


# What making tasks of provided rows holds in a process: the rows' text a few times over, and one parse of the
# longest text it reads as a tree at a time (``python_syntax.MAX_READ_CHARS``, 640 bytes a character).
_ROWS_PER_CHAR = 4
_PARSE_MB = 640 * python_syntax.MAX_READ_CHARS >> 20


def _row_task(name: str, i: int, row: str) -> tuple[Task | None, str]:
    """In a process of the pool: the task of the JSON ``row``, the ``i``-th, or why it is none (a 400's detail). A
    row's task is built as ``/submit`` builds it (its assert tests' helpers parse its starter code once a test): on
    the event loop, one request's rows held every client's requests for 10 s (round 57); all of a request's rows in
    one call of the pool held every other client's work there for as long as they took (120 rows, 94 s: round
    58), so each row is a call of its own, in its client's turn."""
    try:
        return _task_of(name, json.loads(row), i), ""
    except HTTPException as exc:
        return None, str(exc.detail)


def _row_prompt(name: str, i: int, row: str) -> tuple[Prompt | None, str]:
    """:func:`_row_task`'s prompt, in the pool: what a list route answers of a row, never its tests."""
    task, refused = _row_task(name, i, row)
    return (_prompt(task) if task is not None else None), refused


@functools.cache
def _own_budget() -> MemoryBudget:
    """The budget of a server that runs no program (the evaluator's service): its machine's, for its pool alone."""
    return MemoryBudget(default_budget_mb())


def _prepared(task: Task, timeout_s: float, early_stop: bool, completion: str) -> tuple[Extracted, str, dict[str, Any]]:
    """The code of ``completion`` for ``task``, the program that runs it, and the body of its run (its assert tests
    each given the prompt's helpers: a parse of them a test), in a process of the pool."""
    extracted = extract_code(completion, task)
    program = build_program(task, extracted.code)
    body = evaluate_body(task, [program], timeout_s=timeout_s, early_stop=early_stop, cache=False)
    return extracted, program, body


# The most a provided row's tests may be: in number (a task's are hundreds at most: a row of 328 characters was 65,000
# tests, and each /submit in flight held them, 1.7 GB for 200 of one client's; round 60), and in characters written
# out (those of a request's body at most).
ROW_TESTS = 1 << 12
ROW_TEST_CHARS = 64 << 20

# Upstream's ids of datasets codegym has under its own names.
UPSTREAM_IDS = {"humaneval_python": "humaneval", "live_code_bench_v1": "livecodebench"}


# The most rows a request provides: each is read in the analysis pool, and each wrong one was an error made on the
# event loop (a million zeros in 2 MB held every client 8 s; four million, the server OOM-killed: round 62).
ROWS = 4096


class TestConfig(BaseModel):
    """Upstream's ``TestConfig``; every field optional (the client sends them all, null included)."""

    __test__ = False  # not a pytest class

    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: Annotated[list[dict[str, Any]] | dict[str, Any] | None, at_most(ROWS, "rows")] = None
    extra: dict[str, Any] = Field(default_factory=dict)


class GetPromptsRequest(BaseModel):
    dataset: str
    config: TestConfig
    offset: int = 0
    limit: int = 1_000_000


class GetPromptByIdRequest(BaseModel):
    dataset: str
    config: TestConfig
    id: int | str


class SubmitRequest(BaseModel):
    dataset: str
    id: int | str
    completion: str
    config: TestConfig


def _dataset_name(dataset: str) -> str:
    name = UPSTREAM_IDS.get(dataset, dataset)
    if name not in DATASETS or name == "jsonl":
        raise HTTPException(
            400, f"no eval class found for dataset {dataset[:64]}: known are {', '.join(dataset_ids())}"
        )
    return name


def dataset_ids() -> list[str]:
    return sorted({*(n for n in DATASETS if n != "jsonl"), *UPSTREAM_IDS})


@lru_cache(maxsize=16)
def _library(name: str) -> tuple[Task, ...]:
    return tuple(load_tasks(name))


async def _tasks(dataset: str, config: TestConfig, one: bool, request: Request, analyse: Analyse) -> list[Task]:
    """The tasks of a request: its provided rows', each read in the pool, or the named dataset's."""
    name = _dataset_name(dataset)
    if config.provided_data is not None:
        return await _provided(name, config.provided_data, one, request, analyse, _row_task)
    return await _library_tasks(dataset, name)


async def _prompts(dataset: str, config: TestConfig, one: bool, request: Request, analyse: Analyse) -> list[Prompt]:
    """What the list routes answer of a request's tasks: a provided row's prompt comes back from the pool without
    its tests (its task kept in the server for the whole request, each row's tens of thousands of tests from a few
    hundred characters, filled the server until it was killed: round 60)."""
    name = _dataset_name(dataset)
    if config.provided_data is not None:
        return await _provided(name, config.provided_data, one, request, analyse, _row_prompt)
    return [_prompt(task) for task in await _library_tasks(dataset, name)]


async def _provided(
    name: str,
    rows: list[dict[str, Any]] | dict[str, Any],
    one: bool,
    request: Request,
    analyse: Analyse,
    read: Callable[[str, int, str], tuple[T | None, str]],
) -> list[T]:
    if one != isinstance(rows, dict):
        kind = "one row (a dict)" if one else "a list of rows"
        raise HTTPException(400, f"config.provided_data must be {kind} here")
    made: list[T] = []
    for i, row in enumerate([rows] if isinstance(rows, dict) else rows):
        text = json.dumps(row)
        held_mb = (_ROWS_PER_CHAR * len(text) >> 20) + _PARSE_MB
        try:
            # Never on the loop, however short: a row's decoding is not bounded by its length (LiveCodeBench's
            # tests are a compressed pickle).
            value, refused = await analyse(request, functools.partial(read, name, i), text, held_mb, linear=False)
        except off_loop.TooCostly as exc:
            raise HTTPException(400, f"row {i} took more to read than the server gives it: {exc}") from None
        if value is None:
            raise HTTPException(400, refused)
        made.append(value)
    return made


async def _library_tasks(dataset: str, name: str) -> list[Task]:
    try:
        return list(await asyncio.to_thread(_library, name))
    except DatasetError as exc:
        raise HTTPException(400, f"dataset {dataset} could not be loaded: {exc}") from None


def _cut(exc: Exception) -> str:
    """An error of a client's row, which may quote its strings whole (a 2 MB ``task_id`` of DELs made a 10 MB answer:
    round 64): 256 characters of it at most."""
    return cut(str(exc), 256)


def _task_of(name: str, row: dict[str, Any], i: int) -> Task:
    """A provided row: a codegym task (it has ``kind`` and ``tests``), else a row of the named dataset."""
    try:
        task = Task(**row) if "kind" in row and "tests" in row else DATASETS[name].adapter.to_task(row, i)
    except Exception as exc:  # any error of reading a client's row is its fault (a refused pickle was a 500: round 64)
        raise HTTPException(400, f"config.provided_data row {i} is not a {name} row: {_cut(exc)}") from None
    if task is None:
        raise HTTPException(400, f"config.provided_data row {i} has no usable tests")
    # A row's tests as the server will hold and send them, each part counted where it is used: a row stored as a
    # pickle (LiveCodeBench's) shares one string among many tests, which came back from the pool as one and filled
    # the server once written out (1.7 KB of row, 4 GB, the server OOM-killed: round 58).
    if len(task.tests) > ROW_TESTS or _expanded_chars(task.tests, ROW_TEST_CHARS) > ROW_TEST_CHARS:
        raise HTTPException(
            400, f"config.provided_data row {i} has more than {ROW_TESTS} tests or {ROW_TEST_CHARS} characters of them"
        )
    try:  # what /submit will do with it: tests that make no valid sandbox request are the row's fault
        build_program(task, extract_code("", task).code)
        evaluate_body(task, [""], timeout_s=10.0, cache=False)  # built, never sent
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise HTTPException(400, f"config.provided_data row {i} is not a valid task: {_cut(exc)}") from None
    return task


def _expanded_chars(value: object, most: int) -> int:
    """The characters of ``value`` (JSON's values) written out, a part each time it is used, counted until past
    ``most``: never written out here."""
    total, parts = 0, [value]
    while parts and total <= most:
        part = parts.pop()
        if isinstance(part, str):
            total += len(part)
        elif isinstance(part, dict):
            parts += part.keys()
            parts += part.values()
            total += 2  # its braces: a pickle's dict that holds itself is counted past ``most``, never for ever
        elif isinstance(part, (list, tuple)):
            parts += part
            total += 2
        else:
            total += 8  # a number, a bool, null
    return total


def _prompt(task: Task) -> Prompt:
    labels = {
        "kind": task.kind,
        "entry_point": task.entry_point,
        "language": task.language,
        "difficulty": task.difficulty,
        "tests": len(task.tests),
    }
    return {"id": task.task_id, "prompt": task.prompt, "labels": labels}


def _find(tasks: list[Task], id_: int | str) -> Task:
    for task in tasks:
        if task.task_id == str(id_):
            return task
    if isinstance(id_, int) and 0 <= id_ < len(tasks):  # upstream's numeric ids: the row's position
        return tasks[id_]
    raise HTTPException(404, f"no problem with id {str(id_)[:64]!r}")  # a client's string quoted whole: round 63


def make_router(sandbox: Callable[[Request], AsyncSandboxClient], analyse: Analyse | None = None) -> APIRouter:
    """The routes; ``sandbox(request)`` gives a client of the sandbox (base URL and token set), closed after use,
    for the runs of ``request`` (the sandbox's own app runs them as its caller's: see ``codegym_sandbox.main``);
    ``analyse`` works on a completion off the loop (by default in a pool charged to a budget of this server's
    own; the sandbox's app charges its runs' budget)."""
    analyse = analyse or in_pool(lambda _: _own_budget())
    router = APIRouter(tags=["datasets (SandboxFusion)"])

    @router.get("/list_datasets")
    async def list_datasets() -> list[str]:
        return dataset_ids()

    @router.post("/list_ids")
    async def list_ids(req: GetPromptsRequest, request: Request) -> list[int | str]:
        prompts = await _prompts(req.dataset, req.config, False, request, analyse)
        return [p["id"] for p in prompts[req.offset : req.offset + req.limit]]

    @router.post("/get_prompts")
    async def get_prompts(req: GetPromptsRequest, request: Request) -> list[Prompt]:
        prompts = await _prompts(req.dataset, req.config, False, request, analyse)
        return prompts[req.offset : req.offset + req.limit]

    @router.post("/get_prompt_by_id")
    async def get_prompt_by_id(req: GetPromptByIdRequest, request: Request) -> Prompt:
        if req.config.provided_data is not None:
            return (await _prompts(req.dataset, req.config, True, request, analyse))[0]
        return _prompt(_find(await _tasks(req.dataset, req.config, True, request, analyse), req.id))

    @router.post("/submit")
    async def submit(req: SubmitRequest, request: Request) -> dict[str, Any]:
        tasks = await _tasks(req.dataset, req.config, True, request, analyse)
        task = tasks[0] if req.config.provided_data is not None else _find(tasks, req.id)
        # What is read of the task too (its starter code and assert tests: a row's are a request's to shape) decides
        # whether the loop may do it.
        asserts = sum(len(str(t.get("assert_code", ""))) for t in task.tests)
        read = len(req.completion) + len(task.starter_code) + asserts
        early_stop = not req.config.extra.get("run_all_cases", False)
        prepare = functools.partial(_prepared, task, req.config.run_timeout or 10.0, early_stop)
        try:  # charged for what is parsed: no more than ``MAX_READ_CHARS`` of it is
            extracted, program, body = await analyse(
                request, prepare, req.completion, chars=min(read, python_syntax.MAX_READ_CHARS)
            )
        except off_loop.TooCostly as exc:
            return fusion_answers.unread(req.id, f"reading the completion took more than the server gives it: {exc}")
        async with sandbox(request) as client:
            try:
                answer = await client.evaluate(body)
            except SandboxError as exc:
                raise HTTPException(502, f"the sandbox did not answer: {exc}") from None
        result = answer.results[0]
        full = bool(req.config.extra.get("return_full_case", False))
        tests = [
            {
                "passed": out.verdict is Verdict.AC,
                "exec_info": fusion_answers.exec_info(out),
                "test_info": fusion_answers.test_info(test, full),
            }
            for out, test in zip(result.tests, task.tests, strict=False)
        ]
        kind = "empty" if not extracted.code.strip() else "fenced" if extracted.fenced else "heuristic"
        extra = {"verdict": result.verdict.value, "passed": result.passed, "total": result.total}
        return {
            "id": req.id,
            "accepted": result.verdict is Verdict.AC,
            "extracted_code": extracted.code,
            "full_code": program,
            "test_code": None,
            "tests": tests,
            "extracted_type": kind,
            "extra": extra,
        }

    return router
