"""Frames exchanged between the server and an agent (those between the agent and its box: ``box_protocol.py``).

A frame is a 4-byte big-endian length, a JSON header of that length, then the blobs the header lists
(``"blobs": [len, ...]``) back to back. Bulk data (code, stdin, output) travels as raw bytes in blobs so it
is never JSON-escaped, and so the agent can wipe its copy after use.

Each header is a :class:`typing.TypedDict` below. The server writes the configuration and the run frames; the
agent answers with a :class:`ReadyFrame`, a :class:`ResultFrame` or :class:`ResultsFrame`, or an
:class:`ErrorFrame`. The agent runs inside the isolation, so the server reads each answer with
:func:`read_ready`, :func:`read_result` or :func:`read_results` (``wire_schema.conform``: exact keys, exact
types, bounded sizes, and blobs that match the header) before it uses a field; an answer that is not one is
:class:`~.wire_schema.Malformed`, the agent's failure (the run is SE).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from typing import Annotated, Literal, TypedDict

from .wire_schema import Malformed, Max, Range, conform

MAX_HEADER = 1 << 20  # a frame the server sends: a run's header, its files listed (see languages.RUN_FILES_LISTED)
# An agent's answer lists what a compile collected: a compiler that writes thousands of files (a verdict, CE,
# decided on the server's side) answers a header past MAX_HEADER, which must still be read, not taken for a fault.
MAX_ANSWER_HEADER = 16 << 20
MAX_BLOB = 1 << 30
# A run's wall-clock limit does not count the time its processes waited for a CPU that other runs held
# (see ``loop._stretched``), up to this many times the limit: the server waits that much longer for it.
WAIT_CREDIT = 2.0
# A session's cell may stand paused (its slot lent to a cell that waited: backends/cell_turns.py) this many times
# its limit at most, all its pauses together: the server and the client wait that much longer for its answer. A
# cell is lent a slot only where it ends within that (at its limit and its credit for CPU waits): so a cell may
# lend to one of a limit as long as its own.
PAUSE_SHARE = 1.0 + WAIT_CREDIT
# How a run's launch error starts when ``execve`` of the file to run failed (the box's other launch errors
# are its own failures): where that file is the program's own (its compiled executable) and the kernel found
# it no executable, the program's fault, not the sandbox's (see ``verdicts.run_end``).
EXEC_FAILED = "exec failed: "
# What a Python run's process tells the box when the program's source does not compile: sent before any of the
# program could run (nothing of it ran then), so it is never the program's to send.
SOURCE_ERROR = "source does not compile"


# The longest launch error the box reports: what it reads of the program's process's socket, decoded.
MAX_ERROR = 4096
_PATH = Annotated[str, Max(4096)]


class ProtocolError(Exception):
    """The peer sent something that is not a frame, or went away mid-frame."""


# -- the server's frames --------------------------------------------------------------------------------------


class Limits(TypedDict):
    """A run's limits (``executor.RunLimits.agent_limits``)."""

    wall_s: float
    cpu_s: float
    # The run's memory, every language's: what all its processes and files may hold together (the box's sum,
    # the worker's memory cgroup). The address-space limit of each process is set only where the runtime
    # starts under it (not V8's or a JVM's reservations, whose heap flags carry the limit too).
    memory_bytes: int
    address_space_bytes: int | None
    processes: int
    file_size_bytes: int
    open_files: int
    output_bytes: int
    collect_bytes: int


# A file of a run, or one collected after it: its name, its mode, and the index of its blob.
FileEntry = tuple[_PATH, Annotated[int, Range(0, 0o7777)], Annotated[int, Range(0, 1 << 20)]]


class _RunFrame(TypedDict):
    op: Literal["run"]
    files: list[FileEntry]
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    python: str | None  # the script's path, when Python runs in the program's process
    collect: list[str]  # names (or patterns) of files to send back after the run


class RunFrame(_RunFrame, total=False):
    """A run (``stdin``: the index of its input's blob), or with ``stdins`` one program on each input in turn."""

    stdin: int
    stdins: list[int | None]
    shared: bool  # the same files serve other requests too: a test series may stay open for them
    blobs: list[int]


class WorkerConfig(TypedDict, total=False):
    """The first frame an agent reads: its worker's configuration (``choose.agent_config``, and the slot)."""

    slot: int
    namespaces: bool  # False: the agent is the init of a container, which is the isolation
    tools: list[str]  # whose place to answer in the ready frame
    path: str  # the PATH of runs
    run_as: str | None  # in a container, "uid:gid" of programs
    host_uid: int | None  # the first host uid of the range programs map to, by slot (a root server)
    session_slots: list[int]  # the first of the sessions' slots and their number (a session's copies' users)
    copies: list[str]  # in a session's container: where its copies' memory, CPU and pids cgroups are made
    copy_processes: int  # and the most processes each copy may have (one session's)
    hide_processes: bool  # a session's container whose /proc the agent remounts hidepid=invisible (docker's)
    queued_signals: int  # RLIMIT_SIGPENDING of the worker's processes (see host_users.bound_user_counts)
    keep: list[str]  # what the worker's root shows of the host's, and what it hides (see runtime.py)
    hide: list[str]
    packages: str | None  # the runtime packages' directory
    tmp_bytes: int  # the size of a run's scratch space
    seccomp: bool
    network: bool
    drop_sys_path: list[str]


class PingFrame(TypedDict, total=False):
    op: Literal["ping"]
    blobs: list[int]


# -- the agent's answers --------------------------------------------------------------------------------------


class ReadyFrame(TypedDict):
    """The agent's answer to its configuration: its pid, the programs' uid, where runs find each tool."""

    op: Literal["ready"]
    pid: int
    program_uid: int
    tools: dict[str, _PATH | None]
    blobs: list[int]


class ErrorFrame(TypedDict):
    """The agent could not start, or could not serve a request (a fault of the sandbox, never a program's)."""

    op: Literal["error"]
    error: str
    blobs: list[int]


ExitCode = Annotated[int, Range(0, 255)] | None
Signal = Annotated[int, Range(1, 127)] | None
RssKb = Annotated[int, Range(0, 1 << 62)] | None
LaunchError = Annotated[str, Max(MAX_ERROR)] | None  # why the run could not start; EXEC_FAILED, the program's


class _Ended(TypedDict):
    exit_code: ExitCode
    signal: Signal
    wall: float  # seconds
    cpu: float | None  # seconds; None where it could not be read (the run was killed with its box)


class Ended(_Ended, total=False):
    """How a run ended, as the agent answers it (where the box could not report it, without the last two)."""

    max_rss_kb: RssKb
    error: LaunchError


class _Report(_Ended):
    max_rss_kb: RssKb
    error: LaunchError


class Report(_Report, total=False):
    """How a run ended, as the box reports it (``box_protocol``)."""

    left: bool  # it left more of the kernel's memory than may stay, and the box could not give it back (box.py)
    unparsed: bool  # its Python source did not compile: nothing of it ran (SOURCE_ERROR)


class _RunAnswer(Ended):
    timed_out: bool
    output_exceeded: bool


class RunAnswer(_RunAnswer, total=False):
    """A run's answer: how it ended, and whether the agent stopped it; its stdout and stderr are blobs."""

    forked: bool  # run in a test series
    retire: bool  # the worker is to be replaced once this exchange is answered: its runs left too much (box.py)
    unparsed: bool  # the run's Python source did not compile (see Report)


class ResultFrame(RunAnswer):
    """One run's answer: blobs stdout, stderr, then each collected file's (its entry names its index)."""

    op: Literal["result"]
    collected: list[FileEntry]
    blobs: list[int]


class ResultsFrame(TypedDict):
    """The answer of a run on several inputs: one per input, in order; blobs each one's stdout and stderr."""

    op: Literal["results"]
    results: list[RunAnswer]
    blobs: list[int]


# Between two tests of an exchange (a :class:`RunFrame` with ``stdins``), before the next starts: the test before
# has ended, its processes with it. The server's memory budget admits the next by a share again
# (``backends/memory.py``): a test that went on at its whole limit does not hold it for the tests after it.
TEST_ENDED = "test_ended"


def read_ready(header: object) -> ReadyFrame | ErrorFrame:
    """The agent's first answer, if it is one; else :class:`Malformed`."""
    return _error(header) or conform(header, ReadyFrame)


def read_result(header: object, blobs: int) -> ResultFrame | ErrorFrame:
    """The answer to a :class:`RunFrame` (with ``blobs`` blobs after it), if it is one; else :class:`Malformed`."""
    if error := _error(header):
        return error
    frame = conform(header, ResultFrame)
    collected = [index for _, _, index in frame["collected"]]
    if blobs != 2 + len(collected) or collected != list(range(len(collected))):
        raise Malformed(f"a result of {blobs} blobs that collects {len(collected)} files")
    return frame


def read_results(header: object, runs: int, blobs: int) -> ResultsFrame | ErrorFrame:
    """The answer to a :class:`RunFrame` of ``runs`` inputs, if it is one; else :class:`Malformed`."""
    if error := _error(header):
        return error
    frame = conform(header, ResultsFrame)
    if len(frame["results"]) != runs or blobs != 2 * runs:
        raise Malformed(f"{len(frame['results'])} results in {blobs} blobs, for {runs} runs")
    return frame


def _error(header: object) -> ErrorFrame | None:
    if type(header) is dict and header.get("op") == "error":
        return conform(header, ErrorFrame)
    return None


def encode_frame(header: Mapping[str, object], blobs: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([struct.pack(">I", len(raw)), raw, *blobs])


def decode_header(raw: bytes) -> dict[str, object]:
    """A frame's header, as JSON data (read against its frame's type before any other field is used)."""
    header = json.loads(raw)
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not an object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and 0 <= n <= MAX_BLOB for n in sizes):
        raise ProtocolError("bad blob sizes")
    return header


def _read_exact(fd: int, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise ProtocolError("peer closed the channel")
        got += k
    return buf


def read_frame(fd: int) -> tuple[dict[str, object], list[bytearray]]:
    """Read one frame from a blocking file descriptor; blobs come back as bytearrays the caller can wipe."""
    (size,) = struct.unpack(">I", _read_exact(fd, 4))
    if size > MAX_HEADER:
        raise ProtocolError(f"frame header of {size} bytes")
    header = decode_header(bytes(_read_exact(fd, size)))
    sizes = header.get("blobs", [])
    assert isinstance(sizes, list)  # decode_header checked them
    return header, [_read_exact(fd, n) for n in sizes]


def write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def wipe(buf: bytearray) -> None:
    """Overwrite a buffer in place, so its bytes do not survive in memory a later fork inherits."""
    buf[:] = bytes(len(buf))
