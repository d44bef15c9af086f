"""Evaluation jobs: each runs ``run_evaluation`` in the service's event loop and writes into its own directory."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from ..config import RunConfig
from ..report import write_report
from ..results import RunStore
from ..runner import run_evaluation
from ..tasks.sources import DatasetError

Status = Literal["queued", "running", "finished", "failed"]
log = logging.getLogger("codegym.evaluator")


@dataclass
class Job:
    """One evaluation job and where it stands."""

    id: str
    config: RunConfig
    status: Status = "queued"
    done: int = 0
    total: int = 0
    error: str | None = None
    summary: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "progress": {"done": self.done, "total": self.total},
            "error": self.error,
            "dataset": self.config.dataset,
            "created": self.created,
            "finished": self.finished,
            "summary": self.summary,
        }


class JobManager:
    """Starts jobs (at most ``max_jobs`` at once) and keeps them for polling. A job that started ends
    ``finished`` or ``failed`` (``error`` says why), whatever its run raised."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        max_jobs: int = 2,
        sandbox_transport: httpx.AsyncBaseTransport | None = None,
        model_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.jobs: dict[str, Job] = {}
        self._slots = asyncio.Semaphore(max_jobs)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sandbox_transport = sandbox_transport
        self._model_transport = model_transport

    def start(self, config: RunConfig) -> Job:
        job = Job(id=uuid.uuid4().hex[:12], config=config)
        job.config.output = str(self.data_dir / job.id)
        self.jobs[job.id] = job
        task = asyncio.get_running_loop().create_task(self._run(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def results_path(self, job: Job) -> Path:
        return RunStore(job.config.output).results_path

    async def _run(self, job: Job) -> None:
        async with self._slots:
            job.status = "running"

            def progress(done: int, total: int) -> None:
                job.done, job.total = done, total

            try:
                outcome = await run_evaluation(
                    job.config,
                    sandbox_transport=self._sandbox_transport,
                    model_transport=self._model_transport,
                    progress=progress,
                )
                out, info = job.config.output, job.config.shown()
                await asyncio.to_thread(write_report, out, outcome.summary, info, outcome.error, outcome.turns)
                job.summary = {k: v for k, v in outcome.summary.to_dict().items() if k != "per_task"}
                if outcome.turns is not None:
                    job.summary["turns"] = outcome.turns.to_dict()
                job.status, job.error = ("failed", outcome.error) if outcome.error else ("finished", None)
            except (DatasetError, ValueError, OSError) as exc:
                job.status, job.error = "failed", str(exc)
            except Exception as exc:  # a run that failed in a way of its own: failed, never "running" for ever
                log.exception("evaluation job %s failed", job.id)
                job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
            job.finished = time.time()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
