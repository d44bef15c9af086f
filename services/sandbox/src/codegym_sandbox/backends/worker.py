"""One slot's agent and the channel to it, whatever runs the agent (a host process or a container).

A subclass only opens the channel (:meth:`AgentWorker._open`) and knows how to kill what it started; the
frame protocol, the start-up handshake and the deadlines are the same for every backend. Every answer of the
agent is read against its frame's type (``agent/protocol.py``: ``read_ready``, ``read_result``,
``read_results``) before any field of it is used: one that is not of it is the agent's failure, a
:class:`SandboxFault`, and the worker is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import time
from collections.abc import Callable
from typing import TypeVar, cast

from ..agent.protocol import (
    MAX_ANSWER_HEADER,
    TEST_ENDED,
    WAIT_CREDIT,
    ErrorFrame,
    ProtocolError,
    RunAnswer,
    RunFrame,
    WorkerConfig,
    decode_header,
    encode_frame,
    read_ready,
    read_result,
    read_results,
)
from ..agent.session_frames import CellDone, CellFrame, read_cell_done, read_files_written, read_kernel_started
from ..agent.wire_schema import Malformed
from . import cell_pause
from .base import RunOutcome, RunRequest, SandboxFault
from .cell_pause import AnswerDeadline

_ANSWER_GRACE_S = 15.0  # beyond a run's own wall limit, how long an agent may take to answer
GRACE_PER_RUN_S = 2.5  # in a batch, beyond each run's wall limit: the agent's kill grace, and a reset
START_TIMEOUT_S = 60.0
_KERNEL_GRACE_S = 10.0  # beyond a cell's bound: the agent's own grace, and taking its box down
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of /proc/PID/stat's times
A = TypeVar("A")


class AgentWorker:
    """The agent of one slot, spoken to in frames over a byte stream."""

    def __init__(self, slot: int, config: WorkerConfig) -> None:
        self.slot = slot
        self.config = config
        self.runs = 0
        self.replaced = False  # set once a replacement is on its way: never hand this one a run again
        # Its runs left kernel memory that its agent cannot give back (a container's cgroup is its engine's):
        # replaced once the exchange is answered, so that no later run pays for it (agent/memory_cgroup.py).
        self.retiring = False
        self.tools: dict[str, str | None] = {}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.deadline = AnswerDeadline()  # of the answer awaited: held while a session's cell stands paused
        self._paused_at: float | None = None  # when the pause in force was sent
        self.seen_pid = 0  # the agent's pid as the server sees it, where it is no child of the server's (a container's)

    # -- what a backend provides ------------------------------------------------------------------------
    async def _open(self) -> None:
        """Start the agent and set :attr:`reader` and :attr:`writer`, its channel's two ends."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    async def wait_exited(self) -> None:
        """Return when the agent has gone away, for whatever reason."""
        raise NotImplementedError

    async def kill(self) -> None:
        raise NotImplementedError

    async def end(self, grace_s: float) -> None:
        """End the agent, by closing its channel first: an idle one then kills its box, removes its cgroups and
        exits (``agent/loop.py``), which a kill would leave behind; one that has not within ``grace_s`` (busy
        with a run, or stuck) is killed."""
        try:
            if self.writer is not None and self.alive:
                self.writer.close()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wait_exited(), grace_s)
        finally:
            await asyncio.shield(self.kill())  # cancelled meanwhile (its caller went away): killed all the same

    def demand_s(self) -> float | None:
        """Seconds the agent and every process under it have run or waited to run (see
        :func:`tree_demand_s`); None where the server cannot see them (a container's processes)."""
        return None

    def cell_demand_s(self) -> float | None:
        """The CPU time the agent and every process under it have run, for a session's cell (whether it sleeps):
        time run only, not time waiting to run, which a cell could make itself (many processes woken together on
        its one CPU). A container's agent too, where its channel showed the server its pid
        (``agent_channel.peer_pid``); None where the server cannot see them."""
        pid = self.seen_pid or self.own_pid()
        return tree_demand_s(pid, waits=False) if pid and self.alive else None

    def own_pid(self) -> int:
        """The agent's pid where it is the server's child and its processes can be read; else 0."""
        return 0

    def engine_pids(self) -> list[int]:
        """The host processes a container engine keeps for this worker (``worker_cost.py``); none for a local one."""
        return []

    # -- the protocol -----------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self.writer is None:
            raise ConnectionResetError(f"worker {self.slot} is gone")  # killed as its caller waited for a slot
        self.writer.write(data)

    async def _drain(self) -> None:
        """Wait until what was written has gone out (flow control)."""
        assert self.writer is not None
        await self.writer.drain()

    async def start(self) -> None:
        """Start the agent and wait for its ``ready``. Whatever stops that (no answer, a request cancelled as
        its session started, the pool stopping), the agent is killed and its channel closed: a pipe's transport
        left open would otherwise be found only by the garbage collector, at any later moment."""
        try:
            await self._open_and_greet()
        except BaseException:
            await asyncio.shield(self.kill())
            raise

    async def _open_and_greet(self) -> None:
        await self._open()
        config: WorkerConfig = {**self.config, "slot": self.slot}
        self._write(encode_frame(config))
        try:
            header, _ = await asyncio.wait_for(self._read(), START_TIMEOUT_S)
            ready = self._answer(read_ready, header)
        except (asyncio.TimeoutError, SandboxFault) as exc:
            raise SandboxFault(f"worker {self.slot} did not start: {exc or 'no answer'}") from exc
        if ready["op"] != "ready":
            raise SandboxFault(f"worker {self.slot} could not start: {ready['error']}")
        self.tools = ready["tools"]

    async def _read(self) -> tuple[dict[str, object], list[bytes]]:
        assert self.reader is not None
        try:
            (size,) = struct.unpack(">I", await self.reader.readexactly(4))
            if size > MAX_ANSWER_HEADER:
                raise ProtocolError(f"frame header of {size} bytes")
            header = decode_header(await self.reader.readexactly(size))
            sizes = header.get("blobs", [])
            assert isinstance(sizes, list)  # decode_header checked them
            blobs = [await self.reader.readexactly(n) for n in sizes]
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            raise SandboxFault(f"worker {self.slot} went away") from exc
        except (ProtocolError, ValueError) as exc:  # no JSON object, or blobs that are not sizes
            raise SandboxFault(f"worker {self.slot} answered what is not a frame: {exc}") from exc
        return header, blobs

    def _answer(self, read: Callable[..., A], header: dict[str, object], *counts: int) -> A:
        """``read(header, *counts)``: the agent's answer as its frame's type; one that is not is a fault."""
        try:
            return read(header, *counts)
        except Malformed as exc:
            raise SandboxFault(f"worker {self.slot} answered what is not an answer: {exc}") from exc

    def _fault(self, error: ErrorFrame) -> SandboxFault:
        return SandboxFault(f"worker {self.slot}: {error['error']}")

    @staticmethod
    def _header(req: RunRequest, blobs: list[bytes]) -> RunFrame:
        files = []
        for name, (data, mode) in req.files.items():
            files.append((name, mode, len(blobs)))
            blobs.append(data)
        return {
            "op": "run",
            "files": files,
            "argv": req.argv,
            "env": req.env,
            "limits": req.limits,
            "python": req.python,
            "collect": req.collect,
        }

    async def _ask(
        self, header: RunFrame, blobs: list[bytes], answer_by: float, between: Callable[[], None] | None = None
    ) -> tuple[dict[str, object], list[bytes]]:
        self.deadline.begin()
        try:
            self._write(encode_frame(header, blobs))
            await self._drain()
            # A timeout scope, not wait_for: wait_for runs the read as a task of its own, which costs every
            # exchange (a trivial run's, a session's cell) a turn of the event loop.
            async with self.deadline.scope(answer_by):
                while True:
                    frame = await self._read()
                    if between is None or frame[0] != {"op": TEST_ENDED, "blobs": []}:
                        return frame
                    between()
        except (asyncio.TimeoutError, ConnectionError, OSError) as exc:
            raise SandboxFault(f"worker {self.slot} did not answer") from exc
        finally:
            self.deadline.done()

    def pause(self, paused: bool) -> None:
        """Pause the run (or session's cell) running on this worker, or continue it (``cell_pause.py``); a resume
        says how long the pause was held."""
        now = time.monotonic()
        held = None if paused or self._paused_at is None else now - self._paused_at
        self._paused_at = now if paused else None
        with contextlib.suppress(OSError, RuntimeError):  # gone: its cell's answer says so
            self._write(cell_pause.frame(paused, held_s=held))
        self.deadline.hold(paused)

    async def run(self, req: RunRequest) -> RunOutcome:
        blobs: list[bytes] = []
        header = self._header(req, blobs)
        if req.stdin:
            header["stdin"] = len(blobs)
            blobs.append(req.stdin)
        frame, out = await self._ask(header, blobs, req.limits["wall_s"] * (1 + WAIT_CREDIT) + _ANSWER_GRACE_S)
        self.runs += 1
        result = self._answer(read_result, frame, len(out))
        if result["op"] == "error":
            raise self._fault(result)
        collected = {name: (out[2 + i], mode) for name, mode, i in result["collected"]}
        self.retiring = self.retiring or bool(result.get("retire"))
        return _outcome(result, out[0], out[1], collected)

    async def run_tests(
        self, req: RunRequest, stdins: list[bytes | None], between: Callable[[], None] = lambda: None
    ) -> list[RunOutcome]:
        """The program of ``req`` once for each input, in order, in one exchange with the agent (``between``: as
        each test but the last ends, the agent says so: :data:`TEST_ENDED`)."""
        blobs: list[bytes] = []
        header = self._header(req, blobs)
        header["collect"] = []
        if req.shared:
            header["shared"] = True
        indices: list[int | None] = []
        for stdin in stdins:
            indices.append(len(blobs) if stdin else None)
            if stdin:
                blobs.append(stdin)
        header["stdins"] = indices
        answer_by = len(stdins) * (req.limits["wall_s"] * (1 + WAIT_CREDIT) + GRACE_PER_RUN_S) + _ANSWER_GRACE_S
        frame, out = await self._ask(header, blobs, answer_by, between)
        self.runs += len(stdins)
        results = self._answer(read_results, frame, len(stdins), len(out))
        if results["op"] == "error":
            raise self._fault(results)
        self.retiring = self.retiring or any(r.get("retire") for r in results["results"])
        return [_outcome(r, out[2 * i], out[2 * i + 1], {}) for i, r in enumerate(results["results"])]

    # -- a session's kernel (agent/session.py): this worker serves that session alone ----------------------
    async def open_kernel(self, req: RunRequest) -> None:
        """Start the session's kernel: ``req``'s program, files and limits (its wall-clock limit unused)."""
        blobs: list[bytes] = []
        header = cast("dict[str, object]", self._header(req, blobs))
        header["op"] = "kernel"
        frame, _ = await self._ask(cast("RunFrame", header), blobs, START_TIMEOUT_S)
        started = self._answer(read_kernel_started, frame)
        if started["op"] == "error":
            raise self._fault(started)

    async def put_files(self, files: dict[str, tuple[bytes, int]]) -> None:
        """Write ``files`` in the session's directory, beside its running kernel."""
        blobs = [data for data, _ in files.values()]
        entries = [(name, mode, i) for i, (name, (_, mode)) in enumerate(files.items())]
        header = {"op": "files", "files": entries}
        frame, _ = await self._ask(cast("RunFrame", header), blobs, START_TIMEOUT_S)
        written = self._answer(read_files_written, frame)
        if written["op"] == "error":
            raise self._fault(written)

    async def cell(self, message: bytes, wall_s: float) -> tuple[CellDone, bytes]:
        """Send one cell to the kernel; its answer and record. The agent interrupts it past ``wall_s`` and the time
        it waited for a CPU (up to ``WAIT_CREDIT`` times ``wall_s``), and ends the session where that fails."""
        header: CellFrame = {"op": "cell", "wall_s": wall_s, "blobs": [len(message)]}
        frame, out = await self._ask(cast("RunFrame", header), [message], wall_s * (1 + WAIT_CREDIT) + _KERNEL_GRACE_S)
        done = self._answer(read_cell_done, frame, len(out))
        if done["op"] == "error":
            raise self._fault(done)
        return done, out[0]


def _outcome(result: RunAnswer, stdout: bytes, stderr: bytes, collected: dict[str, tuple[bytes, int]]) -> RunOutcome:
    return RunOutcome(
        exit_code=result["exit_code"],
        signal=result["signal"],
        wall_s=result["wall"],
        cpu_s=result["cpu"],
        max_rss_kb=result.get("max_rss_kb"),
        timed_out=result["timed_out"],
        output_exceeded=result["output_exceeded"],
        stdout=stdout,
        stderr=stderr,
        launch_error=result.get("error"),
        collected=collected,
        forked=bool(result.get("forked")),
        unparsed=bool(result.get("unparsed")),
    )


def tree_demand_s(pid: int, waits: bool = True) -> float | None:
    """Seconds ``pid`` and its living descendants have run on a CPU or waited for one (every thread's
    ``/proc/PID/task/TID/schedstat``: time on the CPU plus ``run_delay``; a process whose work is in a thread
    wants a CPU as much as one whose main thread computes), and the CPU time of the descendants they have reaped
    (``cutime`` and ``cstime`` of ``/proc/PID/stat``). Children are found under every thread (any may fork).

    Waiting counts as much as running: a run that would compute but gets no CPU (the machine is busy with
    other work) wants a CPU as much as one that has it, and must not look idle. Reaped descendants count
    because most runs are: a worker that runs short programs one after another computes all the time, while
    its living processes (the agent, its box, a test series) mostly wait for them.
    """
    ns = 0
    ticks = 0
    stack = [pid]
    found = False
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                cutime, cstime = f.read().rsplit(b")", 1)[1].split()[13:15]
            tasks = os.listdir(f"/proc/{p}/task")
        except (OSError, ValueError):
            continue  # gone meanwhile
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/schedstat", "rb") as f:
                    on_cpu, waited, _ = f.read().split()
                with open(f"/proc/{p}/task/{task}/children", "rb") as f:
                    stack.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                continue  # ended meanwhile
            ns += int(on_cpu) + (int(waited) if waits else 0)
        ticks += int(cutime) + int(cstime)
        found = True
    return ns / 1e9 + ticks / CLOCK_TICKS if found else None


class ProcessWorker(AgentWorker):
    """An agent reached through the stdin and stdout of a child process: the agent itself (local
    backend), or a container engine's client attached to it (``podman run -i``)."""

    def __init__(
        self, slot: int, config: WorkerConfig, argv: list[str], env: dict[str, str] | None, cwd: str | None = None
    ) -> None:
        super().__init__(slot, config)
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None

    async def _open(self) -> None:
        await self._spawn(self.argv)

    async def _spawn(self, argv: list[str]) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            limit=1 << 20,
        )
        self.reader = self.proc.stdout
        self.writer = self.proc.stdin

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def demand_s(self) -> float | None:
        # An agent started by a container engine's client is not under it: only a local agent is seen.
        return tree_demand_s(self.pid) if self.config.get("namespaces") and self.alive else None

    def own_pid(self) -> int:
        return self.pid if self.config.get("namespaces") else 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def wait_exited(self) -> None:
        assert self.proc is not None
        await self.proc.wait()

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
