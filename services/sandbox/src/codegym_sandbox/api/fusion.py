"""SandboxFusion-compatible routes: ``POST /run_code``, ``GET /v1/ping``, ``GET /``."""

from __future__ import annotations

import os

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from .convert import fetched, fusion_response
from .deps import ExecutorDep
from .files import decode_files, scratch_name
from .fusion_models import RunCodeRequest, RunCodeResponse

router = APIRouter()


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(req: RunCodeRequest, executor: ExecutorDep) -> RunCodeResponse:
    """Run one program. Always HTTP 200 with a status, as SandboxFusion does; 422 for a bad request."""
    files = decode_files(req.files)
    fetch = [scratch_name(f) for f in req.fetch_files]
    memory = None if req.memory_limit_MB <= 0 else req.memory_limit_MB
    ex = await executor.execute(
        req.language,
        req.code,
        req.stdin.encode() if req.stdin else None,
        files,
        executor.run_limits(req.run_timeout, memory),
        executor.compile_limits(req.compile_timeout),
        fetch,
    )
    return fusion_response(ex, fetched(ex.run), os.environ.get("MY_POD_NAME"))


@router.get("/v1/ping")
async def ping() -> str:
    return "pong"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def root() -> str:
    return "<!doctype html><title>codegym sandbox</title><p>codegym sandbox: see <a href='docs'>/docs</a>.</p>"
