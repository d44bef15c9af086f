"""``POST /run_jupyter``: SandboxFusion's notebook route, cells run in order in one Python process.

Upstream starts a Jupyter kernel per request and has a driver run every cell in it. Here a driver program
does the same in one sandboxed run: the cells share one namespace; each cell's ``print`` output and
``sys.stderr`` writes are its own; the value of a cell's last expression goes to its ``display``
(``{"text/plain": repr}``, as IPython shows it; None shows nothing); an exception goes to its ``error``
(``ename``, ``evalue``, ``traceback`` lines) and the next cell still runs. ``cell_timeout`` (0: none) stops
a cell that runs longer with a TimeoutError in that cell (upstream does not enforce it); ``total_timeout`` is
the run's limit. The driver writes the cells' results to a file that the route reads back, so nothing a
cell prints can be taken for another cell's output.

Status: Success when the driver finished and wrote its results; Failed, with ``cells: []`` and the driver's
own result in ``driver``, when it ran out of time or memory or was killed (as upstream answers).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ..backends.pool import QUEUE_WAIT_S
from ..executor import CACHING, Executor
from ..verdicts import Verdict
from .convert import fusion_result
from .files import decode_files, scratch_name
from .fusion import POD_NAME
from .fusion_models import CommandRunResult, RunStatus

router = APIRouter()

CELLS = ".jupyter_cells.json"
OUTPUT = ".jupyter_output.json"
DRIVER = f"""\
import ast, io, json, signal, sys, traceback

with open({CELLS!r}) as f:
    job = json.load(f)
scope = {{"__name__": "__main__", "__builtins__": __builtins__}}
results = []
real_out, real_err = sys.stdout, sys.stderr


class CellTimeout(TimeoutError):
    pass


def on_alarm(signum, frame):
    raise CellTimeout(f"the cell ran longer than its cell_timeout ({{job['cell_timeout']:g}} s)")


signal.signal(signal.SIGALRM, on_alarm)
for n, source in enumerate(job["cells"]):
    out, err = io.StringIO(), io.StringIO()
    cell = {{"stdout": "", "stderr": "", "display": [], "error": []}}
    sys.stdout, sys.stderr = out, err
    try:
        if job["cell_timeout"] > 0:
            signal.setitimer(signal.ITIMER_REAL, job["cell_timeout"])
        tree = ast.parse(source, f"<cell {{n + 1}}>")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f"<cell {{n + 1}}>", "exec"), scope)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), f"<cell {{n + 1}}>", "eval"), scope)
            if value is not None:
                cell["display"].append({{"text/plain": repr(value)}})
    except BaseException as exc:  # noqa: BLE001 - a cell's error is its result, as in a notebook
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        cell["error"].append({{"ename": type(exc).__name__, "evalue": str(exc), "traceback": lines}})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = real_out, real_err
    cell["stdout"], cell["stderr"] = out.getvalue(), err.getvalue()
    results.append(cell)
with open({OUTPUT!r}, "w") as f:
    json.dump(results, f, default=str)
"""


class RunJupyterRequest(BaseModel):
    """Upstream's request, field for field (unknown fields are ignored, as upstream does)."""

    cells: list[str]
    cell_timeout: float = Field(0, description="seconds per cell; 0: no limit of its own")
    total_timeout: float = Field(45, description="seconds for all the cells (clamped to the server's maximum)")
    memory_limit_MB: int = Field(-1, description="-1 means the server's default limit")
    kernel: str = "python3"
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)


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
    CACHING.set(False)  # a notebook runs every time it is asked to
    QUEUE_WAIT_S.set(executor.settings.fusion_queue_wait_s or None)
    if req.kernel != "python3":
        return RunJupyterResponse(status=RunStatus.SandboxError, message=f"kernel {req.kernel!r} is not supported")
    files = decode_files(req.files)
    job = {"cells": req.cells, "cell_timeout": max(req.cell_timeout, 0.0)}
    files[CELLS] = json.dumps(job).encode()
    fetch = [scratch_name(f) for f in req.fetch_files]
    memory = None if req.memory_limit_MB <= 0 else req.memory_limit_MB
    limits = executor.run_limits(req.total_timeout, memory)
    ex = await executor.execute("python", DRIVER, None, files, limits, executor.compile_limits(None), [*fetch, OUTPUT])
    run = ex.run
    assert run is not None  # Python has no compile step
    fetched = {name: base64.b64encode(data).decode() for name, (data, _) in run.collected.items() if name != OUTPUT}
    if run.verdict is Verdict.SE:
        return RunJupyterResponse(status=RunStatus.SandboxError, message=run.error or "sandbox error")
    output = run.collected.get(OUTPUT)
    cells: list[CellRunResult] = []
    if run.verdict is Verdict.AC and output is not None:
        try:
            cells = [CellRunResult.model_validate(c) for c in json.loads(output[0])]
        except ValueError:  # the cells overwrote the driver's file with something else
            cells = []
    status = RunStatus.Success if cells or (not req.cells and output is not None) else RunStatus.Failed
    return RunJupyterResponse(status=status, driver=fusion_result(run), cells=cells, executor_pod_name=POD_NAME,
                              files=fetched)  # fmt: skip
