"""A cell's result, from what the agent answered and the record the agent wrote of it: the one place
that decides a cell's status."""

from __future__ import annotations

import signal

from ..agent.cell_frames import Record, within
from ..agent.session_frames import CellDone
from .wire import CellErrorModel, CellResult, CellStatus


def _text(data: bytearray) -> str:
    return data.decode("utf-8", "replace")


def status(done: CellDone, memory_mb: int) -> CellStatus:
    """How the cell ended, by the sandbox's measure alone (never by what the cell raised or printed)."""
    if done["alive"]:
        # Interrupted at its limit (whatever the cell did with the interruption), or it ran to its end: the agent
        # interrupts it, past its limit and the time it waited for a CPU that others held.
        return "time_limit" if done["interrupted"] else "finished"
    if done["timed_out"] or done["signal"] == signal.SIGXCPU:
        return "time_limit"  # it could not be interrupted, or the session spent its CPU time
    rss = done["max_rss_kb"] or 0
    if done["oom"] or (done["signal"] == signal.SIGKILL and rss >= memory_mb * 1024):
        return "memory_limit"
    return "killed"


def cell_result(done: CellDone, record: Record, memory_mb: int, output_cap: int) -> CellResult:
    cell = record.cells[0]
    # The value and the error count against the output limit with what the cell printed: cut to what is left.
    room = max(output_cap - len(cell.stdout) - len(cell.stderr), 0)
    shown = within(cell.display, cell.error, room)
    error = None
    if shown["error"]:
        e = shown["error"][0]
        error = CellErrorModel(type=e["ename"], message=e["evalue"], traceback=e["traceback"])
    elif not done["alive"]:
        why = record.ended or done["why"] or "the session's interpreter ended"
        if status(done, memory_mb) == "memory_limit":
            why = f"the session passed its memory limit of {memory_mb} MiB, files included ({why})"
        error = CellErrorModel(type="SessionEnded", message=why, traceback=[])
    display = next((d["text/plain"] for d in shown["display"] if "text/plain" in d), None)
    return CellResult(
        stdout=_text(cell.stdout),
        stderr=_text(cell.stderr),
        display=display,
        error=error,
        status=status(done, memory_mb),
        execution_time=done["wall_s"],
        cpu_time=done["cpu_s"],
        output_truncated=record.cut or shown["cut"],
        alive=done["alive"],
    )
