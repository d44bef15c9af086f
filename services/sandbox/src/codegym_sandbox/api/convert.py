"""Step results in the shapes the two APIs answer with."""

from __future__ import annotations

import base64

from ..executor import Execution, StepResult
from ..judging.wire import step_out, text
from ..verdicts import RunEnd
from .fusion_models import CommandRunResult, CommandRunStatus, RunCodeResponse, RunStatus

__all__ = ["fetched", "fusion_response", "fusion_result", "step_out", "text"]


def fusion_result(step: StepResult) -> CommandRunResult:
    if step.end is RunEnd.SANDBOX_ERROR:
        status = CommandRunStatus.Error
    elif step.timed_out:
        status = CommandRunStatus.TimeLimitExceeded
    else:
        status = CommandRunStatus.Finished
    return CommandRunResult(
        status=status,
        execution_time=step.wall_s,
        return_code=None if step.timed_out else step.return_code,
        stdout=text(step.stdout),
        stderr=text(step.stderr),
        cpu_time=step.cpu_s,
        memory_exceeded=step.memory_exceeded,
        output_truncated=step.output_exceeded,
    )


CUT_OUTPUT = (
    "its output passed the cap (LIMITS__OUTPUT_BYTES) and was cut: what a caller was not given, it cannot judge"
)


def fusion_response(ex: Execution, files: dict[str, str], pod: str | None) -> RunCodeResponse:
    """SandboxFusion's status derivation: an Error step is SandboxError, TLE or rc != 0 is Failed (and a compile
    that made no program, whatever its exit code: see ``languages.unrunnable``).

    Output past the cap fails the run too (upstream returns all of it; here the first part, ``output_truncated``
    saying so): its callers judge its stdout themselves, and a comparison of the part kept would pass a program
    that printed the answer, then padding the comparison strips, then anything (the native API's verdict for it is
    OLE). One that wrote on and on was stopped (killed: rc != 0).
    """
    results = [r for r in (ex.compile, ex.run) if r is not None]
    errors = [r for r in results if r.end is RunEnd.SANDBOX_ERROR]
    if errors:
        status, message = RunStatus.SandboxError, errors[0].error or text(errors[0].stderr)
    elif any(r.timed_out or r.return_code not in (0, None) or r.end is RunEnd.COMPILE_ERROR for r in results):
        status, message = RunStatus.Failed, CUT_OUTPUT if any(r.output_exceeded for r in results) else ""
    elif any(r.output_exceeded for r in results):
        status, message = RunStatus.Failed, CUT_OUTPUT
    else:
        status, message = RunStatus.Success, ""
    return RunCodeResponse(
        status=status,
        message=message,
        compile_result=fusion_result(ex.compile) if ex.compile else None,
        run_result=fusion_result(ex.run) if ex.run else None,
        executor_pod_name=pod,
        files=files,
    )


def fetched(step: StepResult | None) -> dict[str, str]:
    if step is None:
        return {}
    return {name: base64.b64encode(data).decode() for name, (data, _) in step.collected.items()}
