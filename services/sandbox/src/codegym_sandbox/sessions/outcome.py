"""A cell's result, from what the agent answered and the record the session's supervisor wrote: the one place
that decides a cell's status."""

from __future__ import annotations

import signal

from ..agent.cell_frames import Record
from ..agent.session_frames import CellDone
from .wire import CellErrorModel, CellResult, CellStatus

# The exception the kernel raises in a cell at its time limit (``cells.CellTimeout``): the cell was interrupted.
_INTERRUPTED = "CellTimeout"


def _text(data: bytearray) -> str:
    return data.decode("utf-8", "replace")


def status(done: CellDone, record: Record, memory_mb: int) -> CellStatus:
    cell = record.cells[0]
    if done["alive"]:
        ename = cell.error[0]["ename"] if cell.error else None
        if ename == _INTERRUPTED:
            return "time_limit"
        # An allocation past the limit failed, and the session lives on (the cell could catch it: it is its error).
        return "memory_limit" if ename == "MemoryError" else "finished"
    if done["timed_out"] or done["signal"] == signal.SIGXCPU:
        return "time_limit"  # it could not be interrupted, or the session spent its CPU time
    rss = done["max_rss_kb"] or 0
    if done["oom"] or (done["signal"] == signal.SIGKILL and rss >= memory_mb * 1024):
        return "memory_limit"
    return "killed"


def cell_result(done: CellDone, record: Record, memory_mb: int) -> CellResult:
    cell = record.cells[0]
    error = None
    if cell.error:
        e = cell.error[0]
        error = CellErrorModel(type=e["ename"], message=e["evalue"], traceback=e["traceback"])
    elif not done["alive"]:
        why = record.ended or "the session's interpreter ended"
        error = CellErrorModel(type="SessionEnded", message=why, traceback=[])
    display = next((d["text/plain"] for d in cell.display if "text/plain" in d), None)
    return CellResult(
        stdout=_text(cell.stdout),
        stderr=_text(cell.stderr),
        display=display,
        error=error,
        status=status(done, record, memory_mb),
        execution_time=done["wall_s"],
        cpu_time=done["cpu_s"],
        output_truncated=record.cut,
        alive=done["alive"],
    )
