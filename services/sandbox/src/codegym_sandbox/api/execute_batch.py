"""``POST /execute_batch``: the routers open-r1's ``e2b`` and ``morph`` code providers call in routed mode.

open-r1's ``code_reward`` builds, for each completion, a Python script that runs the completion on its tests
and ends with an expression (the pass rate); a notebook kernel (E2B, MorphCloud) runs the script as a cell
and returns that expression's value as the cell's result text, which open-r1 turns into the reward with
``float(text)``. Its routed clients send every script of a batch to one router::

    {"scripts": [...], "languages": ["python", ...], "timeout": 30, "request_timeout": 28}

and read one item per script, in order: the E2B client reads ``execution`` (``results`` of which one is the
main result, ``logs``, ``error``, ``execution_count``; null when the script could not run), the MorphCloud
client ``text`` and ``exception_str``. Each item here carries both, so either provider works with only the
router URL pointed at this server.

A Python script runs as a notebook cell would (``agent/cells.py``): its statements, then its last statement,
when that is an expression, evaluated and its ``repr`` kept as the main result (as IPython displays it; None
displays nothing). The script reaches the kernel over a pipe, one cell at a time, never as a file, and the
kernel is not dumpable: the programs it runs (open-r1's ``python3 -c code``, the model's code) cannot read
the tests and expected outputs the script holds; and the main result comes from the supervisor's record,
which nothing the programs write (a file, their output, an exit status) can set; nor can a module they write
run in the kernel, which imports nothing from where they can write. Other languages run as
programs of their own (``/run_code``'s names); their output is in ``logs`` and they have no main result.
Every script runs in a run of its own, with the same isolation and limits as any other run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from ..agent import cells as notebook
from ..agent.cell_frames import read_record
from ..backends.base import RunPolicy
from ..executor import Execution, Executor, StepResult
from ..judging.fan_out import all_of
from ..verdicts import RunEnd
from .convert import text
from .deps import client_of

router = APIRouter()

_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
# What one batch's answer shows of its scripts' output and results in all: each item's part of it is kept as its
# script ends, the rest let go. A batch holds its items until the last script ends, and one of many scripts,
# each printing up to the output limit, held gigabytes (a control character is six bytes of JSON).
ANSWER_BYTES = 16 << 20


class ExecuteBatchRequest(BaseModel):
    """The routers' request (unknown fields are ignored, as the routers do)."""

    scripts: list[str] = Field(fail_fast=True)
    languages: list[str] | None = Field(None, fail_fast=True)
    timeout: float = Field(300, description="seconds per script (clamped to the server's maximum)")
    request_timeout: float | None = Field(None, description="the client's own HTTP timeout (not used here)")


@router.post("/execute_batch")
async def execute_batch(req: ExecuteBatchRequest, request: Request) -> list[dict[str, Any]]:
    """Every script of the batch, at once; one item per script, in order."""
    executor: Executor = request.app.state.executor
    most = executor.settings.max_runs_per_request
    if len(req.scripts) > most:
        msg = f"{len(req.scripts)} scripts are more than the server's max_runs_per_request ({most}): split the batch"
        raise RequestValidationError([{"type": "value_error", "loc": ["body", "scripts"], "msg": msg}])
    # The whole batch or nothing, as /v1/evaluate's group (a notebook runs every cell it is given): refused
    # halfway, the scripts already queued would run on for a request already answered.
    policy = executor.backend.admit(RunPolicy(cache=False, queue_wait_s=None, client=client_of(request)))
    languages = req.languages or ["python"]
    if len(languages) == 1:  # one language for the whole batch
        languages = languages * len(req.scripts)
    limits = executor.run_limits(req.timeout, None)
    compile_limits = executor.compile_limits(req.timeout)
    cap = executor.settings.limits.output_bytes // 2  # the rest for the frames and the main result
    share = max(ANSWER_BYTES // max(len(req.scripts), 1), 4096)  # of each item's texts: stdout, stderr, result

    async def one(script: str, language: str) -> dict[str, Any]:
        if language in ("python", "python3"):
            job = json.dumps({"cells": [script], "cell_timeout": 0, "output_bytes": min(cap, share)}).encode()
            ex = await executor.execute("python", notebook.CELLS_MAIN, job, {}, limits, compile_limits, policy)
            return _kept(_cell_item(ex), share)
        ex = await executor.execute(language, script, None, {}, limits, compile_limits, policy)
        return _kept(_item(ex), share)

    if len(languages) != len(req.scripts):
        return [_failed("scripts and languages differ in length")] * len(req.scripts)
    return await all_of(one(s, lang) for s, lang in zip(req.scripts, languages, strict=True))


def _kept(item: dict[str, Any], share: int) -> dict[str, Any]:
    """``item`` with its texts cut to ``share`` bytes of JSON in all (a control character is six of them): its
    logs' start (stdout) and end (stderr), its result's and error's start, and its traceback's end."""
    execution = item["execution"]
    part = max(share // 6, 1)  # stdout, stderr, the result, the error's value and traceback, exception_str
    if item.get("exception_str") is not None:
        item["exception_str"] = _fit(item["exception_str"], part)
    if execution is None:
        return item
    logs = execution["logs"]
    logs["stdout"] = [_fit(t, part) for t in logs["stdout"]]
    logs["stderr"] = [_fit(t, part, tail=True) for t in logs["stderr"]]
    for result in execution["results"]:
        result["text"] = _fit(result["text"], part)
    if item["text"] is not None:
        item["text"] = _fit(item["text"], part)
    if (error := execution["error"]) is not None:
        error["name"], error["value"] = _fit(error["name"], part), _fit(error["value"], part)
        error["traceback"] = _fit(error["traceback"], part, tail=True)
    return item


def _fit(text: str, size: int, tail: bool = False) -> str:
    """``text``'s start (or end) that is at most ``size`` bytes once written as JSON, as the answer writes it."""
    while (written := len(json.dumps(text, ensure_ascii=False).encode())) > size and text:
        keep = len(text) * size // written - 1  # what fits at this text's own cost per character, then less
        text = "" if keep <= 0 else text[-keep:] if tail else text[:keep]
    return text


def _item(ex: Execution) -> dict[str, Any]:
    """A program of another language: its output, and an error when it failed."""
    steps = [s for s in (ex.compile, ex.run) if s is not None]
    failed = next((s for s in steps if s.end is not RunEnd.EXITED), None)
    if failed is not None and failed.end is RunEnd.SANDBOX_ERROR:
        return _failed(failed.error or "sandbox error")
    stdout = text(ex.run.stdout) if ex.run else ""
    stderr = "".join(text(s.stderr) for s in steps)
    return _answer(stdout, stderr, None, _error(failed) if failed is not None else None)


def _cell_item(ex: Execution) -> dict[str, Any]:
    """A Python script, from the supervisor's record of its cell."""
    run = ex.run
    assert run is not None  # Python has no compile step
    if run.end is RunEnd.SANDBOX_ERROR:
        return _failed(run.error or "sandbox error")
    record = read_record(run.stdout, 1)
    cell = record.cells[0]
    stderr = text(bytes(cell.stderr) + run.stderr)
    main = error = None
    if run.end is RunEnd.EXITED and record.finished:
        main = next((d.get("text/plain") for d in cell.display), None) if not cell.error else None
        if cell.error:
            e = cell.error[0]
            error = {"name": e["ename"], "value": e["evalue"], "traceback": "".join(e["traceback"])}
    elif run.end is RunEnd.EXITED:  # the kernel ended before it answered: the script did not finish
        error = {"name": "DeadKernelError", "value": record.ended or "the kernel ended", "traceback": ""}
    else:
        error = _error(run)
    return _answer(text(bytes(cell.stdout)), stderr, main, error)


def _answer(stdout: str, stderr: str, main: str | None, error: dict[str, str] | None) -> dict[str, Any]:
    execution = {
        "results": [{"text": main, "is_main_result": True}] if main is not None else [],
        "logs": {"stdout": [stdout] if stdout else [], "stderr": [stderr] if stderr else []},
        "error": error,
        "execution_count": 1,
    }
    exception = f"{error['name']}: {error['value']}" if error else None
    return {"execution": execution, "text": main, "exception_str": exception}


def _error(step: StepResult) -> dict[str, str]:
    """What a kernel reports for a cell that raised: the exception's name and message, and the traceback."""
    if step.end is RunEnd.TIME_LIMIT:
        return {"name": "TimeoutError", "value": "the script ran past its time limit", "traceback": ""}
    if step.end is RunEnd.MEMORY_LIMIT:
        return {"name": "MemoryError", "value": "the script ran out of memory", "traceback": text(step.stderr)}
    tb = text(step.stderr).rstrip()
    last = tb.rsplit("\n", 1)[-1] if tb else ""
    match = _ERROR_LINE.match(last)
    if match:
        return {"name": match.group(1), "value": match.group(2) or "", "traceback": tb}
    return {"name": "Error", "value": f"exit status {step.return_code}", "traceback": tb}


def _failed(message: str) -> dict[str, Any]:
    """A script that could not run at all: no execution, as the routers answer."""
    return {"execution": None, "text": None, "exception_str": message}
