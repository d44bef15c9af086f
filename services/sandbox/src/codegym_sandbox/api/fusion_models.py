"""Request and response bodies of the SandboxFusion-compatible routes, field for field."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field

from ..languages import FUSION_LANGUAGES
from ..models import Files, Names

FusionLanguage = Literal[FUSION_LANGUAGES]  # type: ignore[valid-type]


class RunStatus(str, Enum):
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class CommandRunStatus(str, Enum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class RunCodeRequest(BaseModel):
    """``POST /run_code``. Unknown fields are ignored, as upstream does (callers send extras)."""

    code: str
    language: FusionLanguage
    compile_timeout: float = 10
    run_timeout: float = 10
    memory_limit_MB: int = Field(-1, description="-1 means the server's default limit")
    stdin: str | None = None
    files: Files = Field(default_factory=dict)
    fetch_files: Names = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    # Extensions; SandboxFusion's clients ignore fields they do not know.
    cpu_time: float | None = None
    memory_exceeded: bool = False
    output_truncated: bool = False


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
