"""Probes and metrics: ``/livez``, ``/readyz``, ``/metrics``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .deps import ExecutorDep, MetricsDep

router = APIRouter()


@router.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, executor: ExecutorDep) -> Response:
    """Ready when at least one worker is alive and start-up has started the workers kept ahead for lending
    (``warming``: see ``backends/lending.py``); the body says which backend was chosen and why, and the memory
    limit a run that asks for none gets (``default_memory_mb``: the configured default, fitted to this server's
    budget, so a verdict that hangs on it can be told from the task's own: ``step_limits.fitted_mb``)."""
    status: dict[str, Any] = executor.backend.status()
    status["backend_reason"] = request.app.state.backend_reason
    status["default_memory_mb"] = executor.run_limits(None, None).memory_mb
    ready = status.get("alive", 0) > 0 and not status.get("warming", False)
    return JSONResponse({"ready": ready, **status}, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(metrics: MetricsDep) -> Response:
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
