"""The native wire models of sessions (``/v1/sessions``): public, shared by the server and the client."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..models import Strict, TextFiles

# How a cell ended. finished: it ran to its end (an exception in it is its result, in ``error``); time_limit:
# it ran past its limit (interrupted, or where it could not be, the session ended); memory_limit: the session
# passed its memory limit (it ended); killed: its interpreter ended otherwise (it exited, or was killed).
CellStatus = Literal["finished", "time_limit", "memory_limit", "killed"]


class SessionLimits(Strict):
    memory_mb: int | None = Field(
        None,
        gt=0,
        description="Memory of the whole session, files included (MiB; within the server's bounds, and at least "
        "what an idle session holds).",
    )
    cell_timeout_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Default wall-clock limit of each cell."
    )


class CreateSession(Strict):
    language: Literal["python"] = "python"
    ttl_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="Idle time after which the session ends.")
    limits: SessionLimits = Field(default_factory=SessionLimits)
    files: TextFiles = Field(default_factory=dict, description="name -> content (text), in its directory.")


class SessionCreated(BaseModel):
    session_id: str
    expires_at: float  # Unix time, when it ends unless used again


class ExecuteCell(Strict):
    code: str
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    stdin: str | None = Field(None, description="What the cell reads on sys.stdin (input()); none: end of file.")


class ForkSession(Strict):
    n: int = Field(1, ge=1, description="Copies to make (at most the server's SESSIONS__MAX_FORK).")
    reseed: bool = Field(
        False,
        description="Give each copy random state of its own (Python's random, and numpy's where imported); "
        "otherwise every copy draws what the session would.",
    )


class SessionsForked(BaseModel):
    session_ids: list[str]  # the copies, each a session of its own (the session forked goes on as it was)


class CellErrorModel(BaseModel):
    type: str
    message: str
    traceback: list[str]


class CellResult(BaseModel):
    stdout: str
    stderr: str
    display: str | None  # the last expression's value, as a notebook shows it (text/plain)
    error: CellErrorModel | None
    status: CellStatus
    execution_time: float
    cpu_time: float | None
    output_truncated: bool
    alive: bool  # the session lives on after this cell


class SessionInfo(BaseModel):
    session_id: str
    language: str
    age_s: float
    idle_s: float
    cells: int
    memory_mb: int  # its limit: what it holds of the memory budget
    expires_at: float
    busy: bool


class SessionList(BaseModel):
    sessions: list[SessionInfo]
