"""``POST /run_jupyter``: SandboxFusion's notebook route, cells run in order in one Python kernel.

Upstream starts a Jupyter kernel per request and has a driver run every cell in it. Here one sandboxed run
does the same (``agent/cells.py``): a supervisor sends the cells one at a time to a kernel process, where
they share one namespace; each cell's output on stdout and stderr (its ``print``s, and what its
subprocesses write) is its own; the value of a cell's last expression goes to its ``display``
(``{"text/plain": repr}``, as IPython shows it; None shows nothing); an exception goes to its ``error``
(``ename``, ``evalue``, ``traceback`` lines) and the next cell still runs (``sys.exit()`` too, as in
IPython). ``cell_timeout`` (0: none) stops a cell that runs longer with a TimeoutError in that cell
(upstream does not enforce it); ``total_timeout`` is the run's limit. The results come from the
supervisor, which no cell can reach, never from a file the cells could write. Unlike upstream's kernel, this
one does not import from the working directory (nor from anywhere else a program of the run can write): a
module a cell's program writes there must never run in the cell that checks it. A cell that imports a file
of the request adds the directory itself (``sys.path.insert(0, ".")``).

Status: Success when every cell ran and the kernel answered for it; Failed, with ``cells: []`` and the run
in ``driver`` (all the kernel's output), when the run ran out of time or memory, or the kernel ended
before its last cell did (``os._exit``, a signal, ``exec``), as upstream answers when its driver writes
no results.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from .. import languages
from ..agent import cells as notebook
from ..agent.cell_frames import read_record
from ..backends.base import RunPolicy
from ..executor import Executor
from ..models import Files, Names
from ..quoting import quoted
from ..verdicts import RunEnd
from .convert import CUT_OUTPUT, fusion_result, text
from .deps import client_of
from .files import request_files
from .fusion import POD_NAME
from .fusion_models import CommandRunResult, RunStatus

router = APIRouter()


# Cells of one request: each is a record the server reads back, and a round trip to the kernel (a notebook has tens).
MAX_CELLS = 1000


class RunJupyterRequest(BaseModel):
    """Upstream's request, field for field (unknown fields are ignored, as upstream does)."""

    cells: list[str] = Field(max_length=MAX_CELLS, description=f"at most {MAX_CELLS}")
    cell_timeout: float = Field(0, description="seconds per cell; 0: no limit of its own")
    total_timeout: float = Field(45, description="seconds for all the cells (clamped to the server's maximum)")
    memory_limit_MB: int = Field(-1, description="-1 means the server's default limit")
    kernel: str = "python3"
    files: Files = Field(default_factory=dict)
    fetch_files: Names = Field(default_factory=list)


class CellRunResult(BaseModel):
    stdout: str
    stderr: str
    display: list[dict[str, Any]]
    error: list[dict[str, Any]]


class RunJupyterResponse(BaseModel):
    status: RunStatus
    message: str = ""
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


@router.post("/run_jupyter", response_model=RunJupyterResponse)
async def run_jupyter(req: RunJupyterRequest, request: Request) -> RunJupyterResponse:
    """Run the cells in order in one Python process. HTTP 200 with a status, as upstream answers."""
    executor: Executor = request.app.state.executor
    # A notebook runs every time it is asked to; past the queue wait, 504 as for /run_code.
    policy = RunPolicy(
        cache=False, queue_wait_s=executor.settings.fusion_queue_wait_s or None, client=client_of(request)
    )
    if req.kernel != "python3":
        return RunJupyterResponse(
            status=RunStatus.SandboxError, message=f"kernel {quoted(req.kernel)} is not supported"
        )
    limits = executor.run_limits(req.total_timeout, None if req.memory_limit_MB <= 0 else req.memory_limit_MB)
    files, fetch = request_files(req.files, req.fetch_files, limits.memory_mb, languages.written_names("python"))
    cap = executor.settings.limits.output_bytes // 2  # the rest for the frames and the cells' displays
    job = {"cells": req.cells, "cell_timeout": max(req.cell_timeout, 0.0), "output_bytes": cap}
    ex = await executor.execute(
        "python",
        notebook.CELLS_MAIN,
        json.dumps(job).encode(),
        files,
        limits,
        executor.compile_limits(None),
        policy,
        fetch,
    )
    run = ex.run
    assert run is not None  # Python has no compile step
    fetched = {name: base64.b64encode(data).decode() for name, (data, _) in run.collected.items()}
    if run.end is RunEnd.SANDBOX_ERROR:
        return RunJupyterResponse(status=RunStatus.SandboxError, message=run.error or "sandbox error")
    record = read_record(run.stdout, len(req.cells))
    ended = f"sandbox: {record.ended}\n" if record.ended else ""
    # The run's own output is the supervisor's record: the driver shows what the kernel wrote instead.
    driver = fusion_result(run).model_copy(
        update={
            "stdout": text(bytes(record.stdout)),
            "stderr": text(bytes(record.stderr) + run.stderr) + ended,
            "output_truncated": run.output_exceeded or record.cut,
        }
    )
    cells: list[CellRunResult] = []
    if run.end is RunEnd.EXITED and record.finished:
        cells = [
            CellRunResult(stdout=text(bytes(c.stdout)), stderr=text(bytes(c.stderr)), display=c.display, error=c.error)
            for c in record.cells
        ]
    # A cut output fails the run, as /run_code's does (``convert.fusion_response``): its callers judge what it printed.
    whole = not (run.output_exceeded or record.cut)
    status = RunStatus.Success if run.end is RunEnd.EXITED and record.finished and whole else RunStatus.Failed
    message = "" if whole else CUT_OUTPUT
    return RunJupyterResponse(
        status=status, message=message, driver=driver, cells=cells, executor_pod_name=POD_NAME, files=fetched
    )
