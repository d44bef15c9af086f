"""The native API: ``/v1/execute``, ``/v1/evaluate`` and ``/v1/languages``."""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from .. import languages
from ..backends.base import RunPolicy
from ..executor import Executor
from ..judging import harness, off_loop
from ..judging.judge import execution_verdict
from ..judging.schedule import judge_requests
from ..judging.wire import step_out
from ..loop_turns import Turns, mapped
from ..models import (
    EvaluateBatchRequest,
    EvaluateBatchResponse,
    EvaluateRequest,
    EvaluateResponse,
    ExecuteRequest,
    ExecuteResponse,
    LanguageOut,
)
from . import bodies
from .bodies import Unvalidated
from .convert import fetched
from .deps import ClientDep, ExecutorDep
from .files import request_files

router = APIRouter(prefix="/v1")


@router.post("/execute", response_model=ExecuteResponse)
async def execute(req: ExecuteRequest, executor: ExecutorDep, client: ClientDep) -> ExecuteResponse:
    """Run one program on one input. The verdict is AC when it ran and exited 0 (a ``pytest`` file: when the
    checker saw its tests pass; a ``D_ut`` run that exits 0 is SE, not judged: see ``languages``)."""
    limits = executor.run_limits(req.limits.timeout_s, req.limits.memory_mb)
    files, fetch = request_files(req.files, req.fetch_files, limits.memory_mb, languages.written_names(req.language))
    ex = await executor.execute(
        req.language,
        req.code,
        req.stdin.encode() if req.stdin else None,
        files,
        limits,
        executor.compile_limits(req.limits.compile_timeout_s),
        RunPolicy(cache=req.cache, client=client),
        fetch,
    )
    return ExecuteResponse(
        verdict=execution_verdict(ex),
        compile=step_out(ex.compile) if ex.compile else None,
        run=step_out(ex.run) if ex.run else None,
        files=fetched(ex.run),
    )


@router.post("/evaluate", response_model=EvaluateResponse)
async def evaluate(body: Unvalidated[EvaluateRequest], executor: ExecutorDep, client: ClientDep) -> EvaluateResponse:
    """Judge every program against the shared tests; programs and tests run concurrently."""
    req = await bodies.evaluate_request(body, executor.settings.max_runs_per_request)
    await _check_size(executor, [req], client)
    # The whole group or nothing: never refused halfway through.
    policy = executor.backend.admit(RunPolicy(cache=req.cache, client=client))
    started = time.perf_counter()
    (results,) = await judge_requests(executor, [req], policy)
    return EvaluateResponse(results=results, wall_s=time.perf_counter() - started)


@router.post("/evaluate/batch", response_model=EvaluateBatchResponse)
async def evaluate_batch(
    body: Unvalidated[EvaluateBatchRequest], executor: ExecutorDep, client: ClientDep
) -> EvaluateBatchResponse:
    """Several groups, each against its own tests, in one request: for each, what ``/v1/evaluate`` answers.

    For many small groups (an evaluation with few samples per task) this saves a request per group, and
    the assert tests of every group are judged together (see ``judging.schedule``).
    """
    req = await bodies.evaluate_batch(body, executor.settings.max_runs_per_request)
    await _check_size(executor, req.requests, client)
    # The groups' runs may go together: one asking for no cache, none from the cache.
    policy = executor.backend.admit(RunPolicy(cache=all(r.cache for r in req.requests), client=client))
    started = time.perf_counter()
    results = await judge_requests(executor, req.requests, policy)
    wall = time.perf_counter() - started
    # Made between the loop's turns: 262,144 small requests' answers in one stretch held every client 6 s (round 61).
    responses = await mapped(lambda r: EvaluateResponse(results=r, wall_s=wall), results, Turns())
    return EvaluateBatchResponse(responses=responses, wall_s=wall)


# What a request's call and assert tests may become at once: each is written, with the program, into each
# program's stdin for its round (``harness.runner_stdin``), so a 1 MiB test and 120 programs were 120 MiB of the
# server's, and seconds of its event loop, from one small body. Counted in the bytes built, not a str's
# characters: 2 MB of characters past U+FFFF were 8 MB of each stdin.
EXPANDED_BYTES = 64 << 20


async def _check_size(executor: Executor, reqs: list[EvaluateRequest], client: str) -> None:
    await _check_outputs(executor, reqs, client)
    for i, req in enumerate(reqs):
        lang = languages.lookup(req.language)
        if lang is not None and lang.test_file:  # a file of tests: its run is judged on its own (/v1/execute)
            loc = ["body", "language"] if len(reqs) == 1 else ["body", "requests", i, "language"]
            msg = f"a {lang.name} file holds its own tests, which no test of a request judges: run it on /v1/execute, "
            msg += "or send its program as python with its tests as assert_code"
            raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg}])
    runs = sum(len(req.programs) * len(req.tests) for req in reqs)
    loc = ["body", "programs"] if len(reqs) == 1 else ["body", "requests"]
    if runs > (most := executor.settings.max_runs_per_request):  # a body's own counts are refused before this
        what = f"{len(reqs[0].programs)} programs x {len(reqs[0].tests)} tests" if len(reqs) == 1 else f"{runs} runs"
        raise bodies.too_many_runs(what, most, loc[1])
    if (expanded := sum(harness.expanded_bytes(req) for req in reqs)) > EXPANDED_BYTES:
        msg = f"the call and assert tests, written into each program's input, come to {expanded >> 20} MiB, more "
        msg += f"than {EXPANDED_BYTES >> 20} MiB: send fewer programs per request, or smaller tests"
        raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg}])


async def _check_outputs(executor: Executor, reqs: list[EvaluateRequest], client: str) -> None:
    """Refuse a stdin test that no program can pass: its expected output is more than a run may print (every
    program's verdict would be OLE, and its reward a 0 for a test the server cannot judge). Measured in
    ``client``'s turn at the comparison pool (``off_loop.least_output``)."""
    cap = executor.settings.limits.output_bytes
    for r, req in enumerate(reqs):
        for t, test in enumerate(req.tests):
            expected = test.expected_stdout
            if expected is None or len(expected) * 4 <= cap:  # four bytes a character at most: within the cap
                continue
            if (least := await off_loop.least_output(expected, req.comparison, client)) > cap:
                where = ["tests", t, "expected_stdout"]
                loc = ["body", *where] if len(reqs) == 1 else ["body", "requests", r, *where]
                msg = f"test {t} expects at least {least} bytes of output (comparison {req.comparison.value}), more "
                msg += f"than a run may print here ({cap}, LIMITS__OUTPUT_BYTES): no program can pass it; leave it out"
                msg += " or raise the server's output cap"
                raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg}])


@router.get("/languages", response_model=list[LanguageOut])
async def list_languages(executor: ExecutorDep) -> list[LanguageOut]:
    """Every language this server knows and every value of SandboxFusion's ``language``: whether it runs
    here, and if not, what is missing (a toolchain, or a runner in this server)."""
    out = []
    for lang in languages.LANGUAGES.values():
        missing = executor.missing_tools(lang)
        detail = f"missing: {', '.join(missing)}" if missing else "ready"
        out.append(
            LanguageOut(
                name=lang.name,
                aliases=list(lang.aliases),
                available=not missing,
                compiled=lang.compile is not None,
                detail=detail,
            )
        )
    for name in languages.FUSION_LANGUAGES:
        if languages.lookup(name) is None:
            detail = f"missing: a runner in this server ({languages.WITHOUT_RUNNER[name]})"
            out.append(LanguageOut(name=name, aliases=[], available=False, compiled=False, detail=detail))
    return out
