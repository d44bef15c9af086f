"""The native API: ``/v1/execute``, ``/v1/evaluate`` and ``/v1/languages``."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from .. import harness, languages
from ..compare import outputs_match, values_match
from ..executor import Executor, RunLimits, StepResult, UnsupportedLanguage
from ..verdicts import Verdict
from .convert import fetched, step_out, text
from .deps import ExecutorDep
from .files import decode_files, scratch_name
from .native_models import (
    EvaluateRequest,
    EvaluateResponse,
    ExecuteRequest,
    ExecuteResponse,
    LanguageOut,
    ProgramOut,
    Test,
    TestOut,
)

router = APIRouter(prefix="/v1")


@router.post("/execute", response_model=ExecuteResponse)
async def execute(req: ExecuteRequest, executor: ExecutorDep) -> ExecuteResponse:
    """Run one program on one input. The verdict is AC when it ran and exited 0."""
    files = decode_files(req.files)
    ex = await executor.execute(
        req.language,
        req.code,
        req.stdin.encode() if req.stdin else None,
        files,
        executor.run_limits(req.limits.timeout_s, req.limits.memory_mb),
        executor.compile_limits(req.limits.compile_timeout_s),
        [scratch_name(f) for f in req.fetch_files],
    )
    final = ex.run or ex.compile
    assert final is not None
    return ExecuteResponse(
        verdict=final.verdict,
        compile=step_out(ex.compile) if ex.compile else None,
        run=step_out(ex.run) if ex.run else None,
        files=fetched(ex.run),
    )


@router.post("/evaluate", response_model=EvaluateResponse)
async def evaluate(req: EvaluateRequest, executor: ExecutorDep) -> EvaluateResponse:
    """Judge every program against the shared tests; programs and tests run concurrently."""
    runs = len(req.programs) * len(req.tests)
    if runs > executor.settings.max_runs_per_request:
        msg = f"{len(req.programs)} programs x {len(req.tests)} tests is more than the server's "
        msg += f"max_runs_per_request ({executor.settings.max_runs_per_request}): split the request"
        raise RequestValidationError([{"type": "value_error", "loc": ["body", "programs"], "msg": msg}])
    started = time.perf_counter()
    limits = executor.run_limits(req.limits.timeout_s, req.limits.memory_mb)
    compile_limits = executor.compile_limits(req.limits.compile_timeout_s)
    with executor.backend.admitted():  # the whole group or nothing: never refused halfway through
        results = await asyncio.gather(*(_judge(executor, req, code, limits, compile_limits) for code in req.programs))
    return EvaluateResponse(results=list(results), wall_s=time.perf_counter() - started)


async def _judge(
    executor: Executor, req: EvaluateRequest, code: str, limits: RunLimits, compile_limits: RunLimits
) -> ProgramOut:
    total = len(req.tests)
    try:
        lang = executor.language(req.language)
    except UnsupportedLanguage as exc:
        se = TestOut(verdict=Verdict.SE, wall_s=0.0, cpu_s=None, stdout="", stderr=str(exc))
        return ProgramOut(verdict=Verdict.SE, passed=0, total=total, stopped_early=False, compile=None, tests=[se])
    needs_python = any(t.call is not None or t.assert_code is not None for t in req.tests)
    if needs_python and not lang.in_process_python:
        se = TestOut(verdict=Verdict.SE, wall_s=0.0, cpu_s=None, stdout="", stderr="call and assert tests need Python")
        return ProgramOut(verdict=Verdict.SE, passed=0, total=total, stopped_early=False, compile=None, tests=[se])
    compiled, sources = await executor.build(lang, code, {}, compile_limits)
    if compiled is not None and compiled.verdict is not Verdict.AC:
        tests = [
            TestOut(verdict=compiled.verdict, wall_s=0.0, cpu_s=None, stdout="", stderr=text(compiled.stderr[-1024:]))
        ]
        return ProgramOut(
            verdict=compiled.verdict,
            passed=0,
            total=total,
            stopped_early=False,
            compile=step_out(compiled),
            tests=tests,
        )

    async def one(test: Test) -> TestOut:
        return await _run_test(executor, req, lang, code, sources, test, limits)

    if req.early_stop:
        # Tests run one after another in their given order, so where a program stops never depends on
        # which test happened to finish first.
        outs: list[TestOut] = []
        for test in req.tests:
            outs.append(await one(test))
            if outs[-1].verdict is not Verdict.AC:
                break
    else:
        outs = list(await asyncio.gather(*(one(t) for t in req.tests)))
    passed = sum(o.verdict is Verdict.AC for o in outs)
    first_bad = next((o.verdict for o in outs if o.verdict is not Verdict.AC), Verdict.AC)
    return ProgramOut(
        verdict=first_bad,
        passed=passed,
        total=total,
        stopped_early=len(outs) < total,
        compile=step_out(compiled) if compiled else None,
        tests=outs,
    )


async def _run_test(
    executor: Executor,
    req: EvaluateRequest,
    lang: languages.Language,
    code: str,
    sources: dict[str, tuple[bytes, int]],
    test: Test,
    limits: RunLimits,
) -> TestOut:
    nonce = ""
    stdin = test.stdin.encode() if test.stdin else None
    if test.call is not None:
        assert req.function is not None
        program = harness.call_program(code, req.function, test.call, test.kwargs)
        sources = {**sources, lang.source: (program.encode(), 0o644)}
    elif test.assert_code is not None:
        program, nonce = harness.assert_program(code, test.assert_code)
        sources = {**sources, lang.source: (program.encode(), 0o644)}
        stdin = (nonce + "\n").encode()
    step = await executor.run_built(lang, sources, stdin, limits)
    verdict = step.verdict
    if verdict is Verdict.AC:
        verdict = Verdict.AC if _passed(req, test, step, nonce) else Verdict.WA
    stdout = step.stdout.replace(nonce.encode(), b"") if nonce else step.stdout
    return TestOut(
        verdict=verdict,
        wall_s=step.wall_s,
        cpu_s=step.cpu_s,
        stdout=text(stdout[:1024]),
        stderr=text(step.stderr[-1024:]),
    )


def _passed(req: EvaluateRequest, test: Test, step: StepResult, nonce: str) -> bool:
    if test.expected_stdout is not None:
        return outputs_match(text(step.stdout), test.expected_stdout, req.comparison, req.rel_tol, req.abs_tol)
    if test.call is not None:
        ok, value = harness.call_result(step.stdout)
        return ok and values_match(value, test.expected, req.rel_tol, req.abs_tol)
    return harness.assert_passed(step.stdout, nonce)


@router.get("/languages", response_model=list[LanguageOut])
async def list_languages(executor: ExecutorDep) -> list[LanguageOut]:
    """What this server runs, and for each missing toolchain, what is missing."""
    out = []
    for lang in languages.LANGUAGES.values():
        missing = executor.missing_tools(lang)
        detail = f"missing: {', '.join(missing)}" if missing else "ready"
        out.append(
            LanguageOut(
                name=lang.name, aliases=list(lang.aliases), available=not missing,
                compiled=lang.compile is not None, detail=detail,
            )
        )  # fmt: skip
    return out
