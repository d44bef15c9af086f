"""SandboxFusion-compatible routes: ``POST /run_code``, ``GET /v1/ping``, ``GET /``."""

from __future__ import annotations

import json
import os
from typing import TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ValidationError

from .. import languages
from ..backends.base import RunPolicy
from ..executor import Executor
from .convert import fetched, fusion_response
from .deps import client_of
from .files import request_files
from .fusion_models import RunCodeRequest, RunCodeResponse

router = APIRouter()
M = TypeVar("M", bound=BaseModel)
POD_NAME = os.environ.get("MY_POD_NAME")  # SandboxFusion's variable: a Kubernetes pod sets it from its metadata


@router.post(
    "/run_code",
    response_model=RunCodeResponse,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunCodeRequest"}}},
        }
    },
)
async def run_code(request: Request) -> Response:
    """Run one program. Always HTTP 200 with a status, as SandboxFusion does; 422 for a bad request.

    Every request runs, as upstream runs it, unless the server caches ``/run_code`` (``FUSION_CACHE``).
    Then the body is read raw so that a request seen before is answered from the response cache without
    parsing, validating or serialising anything: RL rollouts repeat requests often, and a hit should cost
    the server little more than the HTTP exchange.
    """
    executor: Executor = request.app.state.executor
    body = await request.body()
    # Upstream runs every request (a program may print the time or a random number): it caches only when the
    # server is told to. Past the queue wait: 504, which clients retry.
    caching = executor.settings.fusion_cache
    policy = RunPolicy(
        cache=caching, queue_wait_s=executor.settings.fusion_queue_wait_s or None, client=client_of(request)
    )
    key = executor.response_key("run_code", body)
    hit = executor.responses.get(key) if caching else None
    if hit is not None:
        executor.metrics.cache.labels(result="hit").inc()
        return Response(hit, media_type="application/json")
    req = parse_body(RunCodeRequest, body)
    limits = executor.run_limits(req.run_timeout, None if req.memory_limit_MB <= 0 else req.memory_limit_MB)
    files, fetch = request_files(req.files, req.fetch_files, limits.memory_mb, languages.written_names(req.language))
    ex = await executor.execute(
        req.language,
        req.code,
        req.stdin.encode() if req.stdin else None,
        files,
        limits,
        executor.compile_limits(req.compile_timeout),
        policy,
        fetch,
    )
    answer = fusion_response(ex, fetched(ex.run), POD_NAME).model_dump_json().encode()
    if caching and ex.repeatable:
        executor.responses.put(key, answer)
    return Response(answer, media_type="application/json")


def parse_body(model: type[M], body: bytes) -> M:
    """Validate a JSON body as FastAPI would, with the same 422 answer when it is not valid.

    JSON may carry a lone surrogate (``"\\ud800"``), which pydantic's parser refuses and FastAPI's (``json``)
    takes: a body that only ``json`` reads is validated from what it read, so that a program's text holding one
    is judged as that program (``agent/program_bytes.py``), as on the native routes; one in its stdin is still
    refused (``main.not_unicode``)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        error = exc
    if any(e["type"] == "json_invalid" for e in error.errors()):
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # not JSON for ``json`` either: pydantic's word stands
            pass
        else:
            try:
                return model.model_validate(data)
            except ValidationError as exc:
                error = exc
    errors = [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False, include_context=False)]
    # Let go of it: a validator's exception that it holds (``models.at_most``'s) holds, through its traceback, this
    # frame, which held it, a cycle through pydantic's error that Python's collector cannot see: every such request
    # kept its body and what it was parsed into, some 0.9 MB a request of 4,096 files (round 63: 1.7 GB in 6 s).
    del error
    raise RequestValidationError(errors, body=body.decode(errors="replace")) from None


@router.get("/v1/ping")
async def ping() -> str:
    return "pong"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def root() -> str:
    return "<!doctype html><title>codegym sandbox</title><p>codegym sandbox: see <a href='docs'>/docs</a>.</p>"
