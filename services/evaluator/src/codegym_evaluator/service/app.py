"""The evaluator service's FastAPI app: ``/v1/jobs`` to start, poll and fetch evaluations."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import httpx
from codegym_sandbox import invalid_requests
from codegym_sandbox.client import AsyncSandboxClient
from codegym_sandbox.quoting import quoted
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse

from ..fusion_datasets import make_router
from .admission import Refused, admit
from .jobs import Job, JobManager
from .settings import EvaluatorSettings, get_settings


def _jobs(request: Request) -> JobManager:
    manager: JobManager = request.app.state.jobs
    return manager


Jobs = Annotated[JobManager, Depends(_jobs)]


def create_app(
    settings: EvaluatorSettings | None = None,
    *,
    sandbox_transport: httpx.AsyncBaseTransport | None = None,
    model_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The app; the transports let tests reach an in-process sandbox and model server."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.jobs = JobManager(
            settings.data_dir,
            max_jobs=settings.max_jobs,
            sandbox_transport=sandbox_transport,
            model_transport=model_transport,
        )
        try:
            yield
        finally:
            await app.state.jobs.aclose()

    def authorize(request: Request) -> None:
        # The health check stays open, as the sandbox's does: probes and orchestrators carry no token.
        if settings.api_token is None or request.url.path == "/livez":
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given, f"Bearer {settings.api_token.get_secret_value()}"):
            raise HTTPException(401, "missing or wrong bearer token")

    app = FastAPI(title="codegym evaluator", version="0.1.0", lifespan=lifespan, dependencies=[Depends(authorize)])
    # The sandbox's 422: FastAPI's own quotes each error's input, the client's data, back (round 64).
    app.add_exception_handler(RequestValidationError, invalid_requests.answer)

    def find(manager: JobManager, job_id: str) -> Job:
        job = manager.jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {quoted(job_id)}")
        return job

    @app.get("/livez")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    def sandbox(request: Request) -> AsyncSandboxClient:
        """The configured sandbox, for the dataset routes' /submit: their runs are this service's, one client of
        the sandbox whoever asked it (its callers are told apart by this service's own limits, not the sandbox's)."""
        if not settings.sandbox_url:
            raise HTTPException(503, "no sandbox configured (CODEGYM_EVALUATOR_SANDBOX_URL)")
        token = settings.sandbox_token.get_secret_value() if settings.sandbox_token else None
        return AsyncSandboxClient(settings.sandbox_url, token=token, timeout=None, transport=sandbox_transport)

    app.include_router(make_router(sandbox))  # SandboxFusion's dataset routes: set_dataset_endpoint(this URL)

    @app.post("/v1/jobs", status_code=202)
    async def start_job(body: dict[str, Any], manager: Jobs) -> dict[str, Any]:
        """Start an evaluation. The body holds ``codegym-eval run``'s options (``dataset``, ``base_url``,
        ``model``, ``n``, ``k``, ...); ``sandbox_url`` defaults to the service's. What a job may name (other
        sandboxes, model endpoints, files of the host) is decided by :func:`.admission.admit`."""
        try:
            config = admit(body, settings)
        except Refused as exc:
            raise HTTPException(exc.status, exc.detail) from None
        return manager.start(config).view()

    @app.get("/v1/jobs")
    async def list_jobs(manager: Jobs) -> list[dict[str, Any]]:
        return [j.view() for j in manager.jobs.values()]

    @app.get("/v1/jobs/{job_id}")
    async def get_job(job_id: str, manager: Jobs) -> dict[str, Any]:
        """Status, progress (samples judged of all) and, once finished, the summary."""
        return find(manager, job_id).view()

    @app.get("/v1/jobs/{job_id}/results")
    async def job_results(job_id: str, manager: Jobs) -> FileResponse:
        """``results.jsonl``: one line per judged sample (so far, while the job runs)."""
        path = manager.results_path(find(manager, job_id))
        if not path.exists():
            raise HTTPException(404, "no results yet")
        return FileResponse(path, media_type="application/x-ndjson")

    @app.get("/v1/jobs/{job_id}/summary")
    async def job_summary(job_id: str, manager: Jobs) -> FileResponse:
        """``summary.json`` of a finished job (with per-task results)."""
        job = find(manager, job_id)
        path = manager.results_path(job).parent / "summary.json"
        if job.status in ("queued", "running") or not path.exists():
            raise HTTPException(409, f"job {quoted(job_id)} is {job.status}; no summary yet")
        return FileResponse(path, media_type="application/json")

    return app
