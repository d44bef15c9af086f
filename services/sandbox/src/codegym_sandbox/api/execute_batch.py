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

A Python script runs as a cell would: its statements, then its last statement, when that is an expression,
evaluated and its ``repr`` kept as the main result (as IPython displays it; None displays nothing). Other
languages run as programs of their own (``/run_code``'s names); their output is in ``logs`` and they have no
main result. Every script runs in a run of its own, with the same isolation and limits as any other run.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ..backends.pool import QUEUE_WAIT_S
from ..executor import CACHING, Execution, Executor, StepResult
from ..verdicts import Verdict
from .convert import text

router = APIRouter()

# The cell runner: the script is a file of its own, so that its line numbers and tracebacks are its own.
CELL = "cell.py"
MAIN_RESULT = ".main_result"
RUNNER = f"""\
import ast, sys
with open({CELL!r}) as f:
    tree = ast.parse(f.read(), "<cell>")
last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
scope = {{"__name__": "__main__", "__builtins__": __builtins__}}
exec(compile(tree, "<cell>", "exec"), scope)
if last is not None:
    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), scope)
    if value is not None:
        with open({MAIN_RESULT!r}, "w") as f:
            f.write(repr(value))
"""
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")


class ExecuteBatchRequest(BaseModel):
    """The routers' request (unknown fields are ignored, as the routers do)."""

    scripts: list[str]
    languages: list[str] | None = None
    timeout: float = Field(300, description="seconds per script (clamped to the server's maximum)")
    request_timeout: float | None = Field(None, description="the client's own HTTP timeout (not used here)")


@router.post("/execute_batch")
async def execute_batch(req: ExecuteBatchRequest, request: Request) -> list[dict[str, Any]]:
    """Every script of the batch, at once; one item per script, in order."""
    executor: Executor = request.app.state.executor
    CACHING.set(False)  # a notebook runs every cell it is given
    QUEUE_WAIT_S.set(None)
    languages = req.languages or ["python"]
    if len(languages) == 1:  # one language for the whole batch
        languages = languages * len(req.scripts)
    limits = executor.run_limits(req.timeout, None)
    compile_limits = executor.compile_limits(req.timeout)

    async def one(script: str, language: str) -> dict[str, Any]:
        if language in ("python", "python3"):
            ex = await executor.execute("python", RUNNER, None, {CELL: script.encode()}, limits, compile_limits,
                                        [MAIN_RESULT])  # fmt: skip
        else:
            ex = await executor.execute(language, script, None, {}, limits, compile_limits)
        return _item(ex)

    if len(languages) != len(req.scripts):
        return [_failed("scripts and languages differ in length")] * len(req.scripts)
    return list(await asyncio.gather(*(one(s, lang) for s, lang in zip(req.scripts, languages, strict=True))))


def _item(ex: Execution) -> dict[str, Any]:
    steps = [s for s in (ex.compile, ex.run) if s is not None]
    failed = next((s for s in steps if s.verdict is not Verdict.AC), None)
    if failed is not None and failed.verdict is Verdict.SE:
        return _failed(failed.error or "sandbox error")
    run = ex.run
    stdout = text(run.stdout) if run else ""
    stderr = "".join(text(s.stderr) for s in steps)
    main = run.collected.get(MAIN_RESULT) if run is not None and failed is None else None
    main_text = main[0].decode("utf-8", errors="replace") if main is not None else None
    error = _error(failed) if failed is not None else None
    execution = {
        "results": [{"text": main_text, "is_main_result": True}] if main_text is not None else [],
        "logs": {"stdout": [stdout] if stdout else [], "stderr": [stderr] if stderr else []},
        "error": error,
        "execution_count": 1,
    }
    exception = f"{error['name']}: {error['value']}" if error else None
    return {"execution": execution, "text": main_text, "exception_str": exception}


def _error(step: StepResult) -> dict[str, str]:
    """What a kernel reports for a cell that raised: the exception's name and message, and the traceback."""
    if step.verdict is Verdict.TLE:
        return {"name": "TimeoutError", "value": "the script ran past its time limit", "traceback": ""}
    if step.verdict is Verdict.MLE:
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
