"""A Python interpreter for verl's multi-turn rollouts: a ``BaseTool`` on codegym's sandbox sessions.

    # tool_config.yaml, given to verl as actor_rollout_ref.rollout.multi_turn.tool_config_path
    tools:
      - class_name: codegym_evaluator.verl_tool.CodeInterpreterTool
        config: {type: native, sandbox_url: "http://sandbox:8080", ttl_s: 300}

The model calls ``code_interpreter(code)``; the code runs as one cell of a Python session that belongs to its
trajectory, so what one call defines, imports or writes the next call of the same trajectory sees, and no other
trajectory does. The answer is what the cell printed, its last expression's value, its traceback, and its
time-out or end said in words (``feedback.cell_feedback``), within ``output_budget`` characters.

verl's ``ToolAgentLoop`` calls ``create``, ``execute`` and ``release`` around every single tool call, with a
fresh instance id each time, so the instance is not the trajectory: the session is keyed on the trajectory's
``agent_data`` object itself (``execute``'s ``agent_data`` keyword), made on its first call, and ``release`` ends
only the call. Not on its ``request_id``: with ``rollout.full_determinism`` verl names sample i of every step
``det-i``, and a name would hand the next step's trajectory the previous one's interpreter. Nothing in verl tells
a tool that a trajectory ended, but verl drops its ``agent_data`` then: the tool ends the session once that
object is collected (best effort), else the sandbox ends it once unused for ``ttl_s`` (its lease); or at once
:meth:`CodeInterpreterTool.end_trajectory` or ``calc_reward`` do (a reward hook that a loop calls once a
trajectory is over). Called without ``agent_data`` (verl's older per-trajectory instances, or by hand), the
instance is the trajectory and ``release`` ends its session.

Calls of one trajectory run one after another (verl runs a turn's tool calls at once; a session runs one cell at
a time). Nothing here raises to verl for a sandbox's failure: the model reads what happened (the session expired
and a fresh one ran the cell, the sandbox could not be reached), as it reads its own code's errors.

Settings (the ``config`` mapping of verl's tool config): ``sandbox_url`` (one URL or a list; else
``CODEGYM_SANDBOX_URL``, else ``http://127.0.0.1:8080``), ``api_token`` (else ``CODEGYM_SANDBOX_API_TOKEN``),
``ttl_s``, ``cell_timeout_s``, ``memory_mb``, ``output_budget``: see :class:`ToolSettings`.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from codegym_sandbox.client import DEFAULT_URL, AsyncSandboxClient, AsyncSession, SandboxError, SessionGone
from pydantic import BaseModel, ConfigDict, Field

from .feedback import cell_feedback, ended_while_running, not_text

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as missing:
    raise ImportError(
        f"codegym_evaluator.verl_tool is a tool for verl and needs it installed: pip install verl ({missing})"
    ) from missing

URL_ENV, TOKEN_ENV = "CODEGYM_SANDBOX_URL", "CODEGYM_SANDBOX_API_TOKEN"

SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": (
            "Run Python code in a Python interpreter that is kept for this conversation: variables, imports and "
            "files stay from one call to the next. Answers what the code printed, the value of its last "
            "expression, and its traceback if it raised."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
        },
    },
}


class ToolSettings(BaseModel):
    """The ``config`` of the tool in verl's tool config; a key not here is refused (a typo would be lost)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["native"] = Field("native", description="verl's tool type (its registry reads it).")
    sandbox_url: str | list[str] | None = Field(
        None, description=f"The sandbox server(s); else ${URL_ENV}, else {DEFAULT_URL}."
    )
    api_token: str | None = Field(None, description=f"The sandbox's bearer token; else ${TOKEN_ENV}.")
    ttl_s: float = Field(
        300.0, gt=0, description="A trajectory's session unused this long is ended by the sandbox (its lease)."
    )
    cell_timeout_s: float = Field(10.0, gt=0, description="Wall-clock limit of one call's code.")
    memory_mb: int | None = Field(
        256,  # as trl_env.SESSION_MEMORY_MB: numpy works in it, and twice the trajectories fit as at 512
        gt=0,
        description="Memory of a session in MiB, held for its life; null: the sandbox's SESSIONS__MEMORY_MB.",
    )
    output_budget: int = Field(2000, ge=100, description="Characters of the answer the model reads, at most.")
    concurrency: int = Field(64, ge=1, description="Requests to the sandbox in flight, over all trajectories.")

    def urls(self) -> list[str]:
        url = self.sandbox_url or os.environ.get(URL_ENV) or DEFAULT_URL
        return [url] if isinstance(url, str) else url

    def token(self) -> str | None:
        return self.api_token or os.environ.get(TOKEN_ENV) or None


@dataclass
class _Trajectory:
    """What the tool holds of one trajectory: its session (made on its first call) and the lock of its calls."""

    key: int | str  # in the tool's table: its agent_data's id, or the instance's id
    name: str  # its request id, or the instance's id: what sessions() shows, never what finds it
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session_id: str | None = None
    url: str | None = None
    used: float = field(default_factory=time.monotonic)
    ended: bool = False  # taken out of the table: a call waiting on its lock goes to a fresh one
    ref: weakref.ref[Any] | None = None  # its agent_data, where that can be weak-referenced
    held: Any = None  # else its agent_data itself, so that the id keying it is no other object's meanwhile

    def of(self, agent_data: Any) -> bool:
        return (self.ref() if self.ref is not None else self.held) is agent_data


class CodeInterpreterTool(BaseTool):  # type: ignore[misc]  # verl's classes are not followed by mypy
    """verl's ``BaseTool``: ``code_interpreter(code)`` in a Python session of the trajectory's own (see the
    module's docstring). ``transport`` (an httpx transport) lets a test run the sandbox in-process."""

    def __init__(
        self,
        config: dict[str, Any],
        tool_schema: OpenAIFunctionToolSchema | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = ToolSettings.model_validate(config or {})
        super().__init__(config, tool_schema)
        self._transport = transport
        self._client: AsyncSandboxClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        # A trajectory by its agent_data's id (checked to be that object: ids are reused), or a call's instance id.
        self._trajectories: dict[int | str, _Trajectory] = {}
        self._instances: dict[str, _Trajectory] = {}  # instance id -> the trajectory it called for
        self._ending: set[asyncio.Task[None]] = set()  # sessions of collected trajectories being deleted

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        # BaseTool.__init__ asks for it before it sets tool_schema, when the config gives none.
        schema: OpenAIFunctionToolSchema | None = getattr(self, "tool_schema", None)
        return schema or OpenAIFunctionToolSchema.model_validate(SCHEMA)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """A call's instance id; the session waits for the call (only ``execute`` knows the trajectory)."""
        return instance_id or uuid.uuid4().hex, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run ``parameters["code"]`` in the trajectory's session: the answer's text, no step reward, metrics."""
        code = parameters.get("code")
        if not isinstance(code, str) or not code.strip():
            text = "code_interpreter needs `code`: the Python code to run, as a string."
            return ToolResponse(text=text), 0.0, {"sandbox_error": False}
        if refused := not_text(code):
            return ToolResponse(text=refused), 0.0, {"sandbox_error": False}
        self._forget_idle()
        while True:
            trajectory = self._trajectory(instance_id, kwargs.get("agent_data"))
            self._instances[instance_id] = trajectory
            async with trajectory.lock:
                if trajectory.ended:
                    continue  # ended while this call waited: its session is gone, the next entry makes one
                trajectory.used = time.monotonic()
                text, metrics = await self._run_cell(trajectory, code)
                trajectory.used = time.monotonic()
            return ToolResponse(text=text), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """No reward of its own (the task's tests give that); a loop calls it once a trajectory is over, so it
        ends the trajectory's session."""
        agent_data = kwargs.get("agent_data")
        if agent_data is not None:
            await self.end_trajectory(agent_data)
        elif (trajectory := self._instances.get(instance_id)) is not None:
            await self._end(trajectory)
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """The end of one call. Where the instance was the trajectory (no ``agent_data``), its session ends too."""
        trajectory = self._instances.pop(instance_id, None)
        if trajectory is not None and trajectory.key == instance_id:
            await self._end(trajectory)

    async def end_trajectory(self, trajectory: Any) -> None:
        """End a trajectory's session now (its TTL would end it later): given its ``agent_data``, that one; given
        a string, every trajectory of that request id (or the instance of a call without ``agent_data``).
        Unknown or ended already: nothing."""
        if isinstance(trajectory, str):
            ends = [t for k, t in self._trajectories.items() if trajectory in (k, t.name)]
        else:
            found = self._trajectories.get(id(trajectory))
            ends = [found] if found is not None and found.of(trajectory) else []
        for found in ends:
            await self._end(found)

    async def aclose(self) -> None:
        """End every session the tool holds and close its client (at the end of training)."""
        for trajectory in list(self._trajectories.values()):
            await self._end(trajectory)
        if self._ending:
            await asyncio.gather(*self._ending)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def sessions(self) -> dict[str, str]:
        """The sessions the tool holds, by id: the name of the trajectory of each (its request id, or instance)."""
        return {t.session_id: t.name for t in self._trajectories.values() if t.session_id is not None}

    def _trajectory(self, instance_id: str, agent_data: Any) -> _Trajectory:
        """The trajectory of a call: its ``agent_data`` object (never its name: see the module), else the
        instance itself; a new one holds nothing of any other's, whatever its name."""
        if agent_data is None:
            return self._trajectories.setdefault(instance_id, _Trajectory(instance_id, instance_id))
        key = id(agent_data)
        known = self._trajectories.get(key)
        if known is not None and known.of(agent_data):
            return known
        if known is not None:  # a collected object's id, whose finalizer has not reached the loop yet
            self._dropped(known)
        trajectory = _Trajectory(key, str(getattr(agent_data, "request_id", None) or instance_id))
        try:
            trajectory.ref = weakref.ref(agent_data)
            # The finalizer holds the tool, never the trajectory's object; it runs wherever verl drops it.
            weakref.finalize(agent_data, self._collected, asyncio.get_running_loop(), trajectory).atexit = False
        except TypeError:  # not weak-referenceable: held, until ended or idle for twice the TTL
            trajectory.held = agent_data
        self._trajectories[key] = trajectory
        return trajectory

    def _collected(self, loop: asyncio.AbstractEventLoop, trajectory: _Trajectory) -> None:
        """verl dropped a trajectory's agent_data: end its session on the tool's loop (best effort: a closed loop
        leaves it to its TTL). Run from a finalizer, so it only hands the work to the loop."""
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._dropped, trajectory)
            except RuntimeError:
                pass  # closed meanwhile

    def _dropped(self, trajectory: _Trajectory) -> None:
        task = asyncio.get_running_loop().create_task(self._end(trajectory))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _end(self, trajectory: _Trajectory) -> None:
        if self._trajectories.get(trajectory.key) is trajectory:
            del self._trajectories[trajectory.key]
        trajectory.ended = True
        async with trajectory.lock:
            if trajectory.session_id is not None:
                await self._delete(trajectory)

    async def _run_cell(self, trajectory: _Trajectory, code: str) -> tuple[str, dict[str, Any]]:
        budget = self.settings.output_budget
        note = ""
        try:
            session = await self._session(trajectory)
            try:
                cell = await session.execute(code)  # the session's cell_timeout_s
            except SessionGone as gone:
                trajectory.session_id = None
                if gone.ran:  # it ended as the cell ran: run again, the cell would have run twice
                    return ended_while_running(gone.detail)[:budget], {"sandbox_error": False, "status": "killed"}
                # Expired while the model was thinking (or ended by a cell before): the cell never ran there.
                note = f"[The interpreter of earlier calls had ended ({gone.detail}): its variables are gone; "
                note += "this code ran in a fresh one.]\n"
                session = await self._session(trajectory)
                cell = await session.execute(code)  # the session's cell_timeout_s
        except SandboxError as error:
            # The session is kept: a call that failed half-way may have ended it, and then the next call is told
            # so (SessionGone, above) before it runs in a fresh one; where it lives on, its state is still there.
            text = f"The sandbox could not run the code (a failure of the sandbox, not of the code): {error}"
            return text[:budget], {"sandbox_error": True}
        if not cell.alive:
            trajectory.session_id = None  # the next call starts a fresh interpreter, as the answer says
        metrics = {"sandbox_error": False, "status": cell.status, "execution_time": cell.execution_time}
        return note + cell_feedback(cell, budget=budget - len(note)), metrics

    async def _session(self, trajectory: _Trajectory) -> AsyncSession:
        """The trajectory's session: re-attached by its id (no request), or made now."""
        client = self._sandbox()
        if trajectory.session_id is not None and trajectory.url is not None:
            return await client.attach(trajectory.session_id, trajectory.url)
        s = self.settings
        session = await client.session(ttl_s=s.ttl_s, memory_mb=s.memory_mb, cell_timeout_s=s.cell_timeout_s)
        trajectory.session_id, trajectory.url = session.session_id, session.url
        return session

    async def _delete(self, trajectory: _Trajectory) -> None:
        assert trajectory.session_id is not None and trajectory.url is not None
        try:
            session = await self._sandbox().attach(trajectory.session_id, trajectory.url)
            await session.close()
        except SandboxError:
            pass  # unreachable now: its lease ends it
        trajectory.session_id = None

    def _sandbox(self) -> AsyncSandboxClient:
        """The client of the running event loop (a client belongs to the loop it first sends on)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            s = self.settings
            self._client = AsyncSandboxClient(
                s.urls(),
                token=s.token(),
                timeout=s.cell_timeout_s + 30.0,  # a cell's answer comes after its time limit
                concurrency=s.concurrency,
                transport=self._transport,
            )
            self._client_loop = loop
        return self._client

    def _forget_idle(self) -> None:
        """Drop what the tool holds of trajectories unused for twice the TTL whose end the tool cannot see (no
        agent_data, or one that cannot be weak-referenced): the sandbox ended their sessions, and without this the
        table would grow for ever. One whose agent_data lives on is kept, to say that its interpreter ended."""
        horizon = time.monotonic() - 2 * self.settings.ttl_s
        idle = [t for t in self._trajectories.values() if t.used < horizon and not t.lock.locked()]
        for trajectory in idle:
            if trajectory.ref is None or trajectory.ref() is None:
                del self._trajectories[trajectory.key]
                trajectory.ended = True
        self._instances = {i: t for i, t in self._instances.items() if not t.ended}
