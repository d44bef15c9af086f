"""Messages between the agent and its box, the box and a test series' process, that process and its checker.

Each is one JSON object per packet (``SOCK_SEQPACKET``; a command carries the run's descriptors), of a
:class:`typing.TypedDict` below. Commands go down, from the more trusted process to the less trusted one, and
are read as they are typed; reports come up, and each is read against its type (``wire_schema.conform``)
before a field of it is used, by the function that reads it here:

* the box's report to the agent (:func:`read_box_report`): the box shares its namespace with every program.
  A report that is not one is the box's failure, so the run is SE, as an answer the agent cannot parse was;
* a test series' report to the box (:func:`read_series_report`) and the checker's outcome to the series'
  process (:func:`read_outcome`): both keep ids no test has, but where programs share their uid a test
  can kill them. A report that is not one is the test's doing: the series is broken, and the agent runs the
  test again on its own (never SE).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal, TypedDict, final

from .protocol import ExitCode, Limits, Report, RssKb, Signal, WorkerConfig
from .wire_schema import conform

if TYPE_CHECKING:
    from .memory_cgroup import MemoryCgroup
    from .run_cgroup import RunCgroup

# An assert run's outcomes (``assert_outcome.OUTCOMES``: see ``assert_runner.check``).
Outcome = Literal["passed", "failed", "error", "ended", "unparsed"]  # unparsed: the program does not compile


class BoxConfig(WorkerConfig, total=False):
    """The worker's configuration as the agent and its box hold it: the server's, and what the agent made."""

    memory_cgroup: MemoryCgroup | None  # the box's memory cgroup (local backend), never on a wire
    run_cgroup: RunCgroup | None  # the cgroup of the runs' processes, or a container's own: see run_cgroup.py
    program_uid: int
    program_gid: int
    memory_floor_kb: int  # the supervisors' kernel memory in a container, as the worker's first box found it


# A session's kernel was copied (agent/session_family.py): the box lets its run go, and only reaps from then on.
RELEASE = b"release"
RELEASED = b"released"

# -- commands -------------------------------------------------------------------------------------------------


class _RunCommand(TypedDict):
    argv: list[str]
    env: dict[str, str]
    limits: Limits
    python: str | None
    op: Literal["run"]
    cwd: str


class RunCommand(_RunCommand, total=False):
    """Run a program on the descriptors sent with it (stdin, stdout, stderr); with ``series``, start a test
    series with it. The box passes it on to the program's process as it is."""

    series: bool


class OpCommand(TypedDict):
    """``test``: the series' next test (on the descriptors sent with it); ``reset``: fresh scratch space;
    ``kill``: kill the run. The box answers a reset with :class:`Ready`."""

    op: Literal["test", "reset", "kill", "ready"]


BoxCommand = RunCommand | OpCommand


class Hello(TypedDict):
    """The middle process's message as the box starts: the box's pid."""

    pid: int


class _Ready(TypedDict):
    op: Literal["ready"]


class Ready(_Ready, total=False):
    """The box's message as it starts (with ``floor_kb``, where it reads a memory cgroup) and after every reset
    (with ``retire``, where a run left more there than the reset could give back): with its scratch directory's
    descriptor."""

    floor_kb: int
    retire: bool


# -- reports --------------------------------------------------------------------------------------------------


class SeriesReport(Report):
    """How a test of a series ended, and whether the series can take another (``more``)."""

    more: bool


@final
class Broken(TypedDict):
    """The test could not be run in its series (or took it down): the agent runs it again on its own."""

    more: Literal[False]
    broken: Literal[True]


class _Status(TypedDict):
    exit_code: ExitCode
    signal: Signal
    cpu: float
    max_rss_kb: RssKb


@final
class TestStatus(_Status, total=False):
    """How a test's process ended, as its series' process saw it (``programs.status_report``); ``unparsed``
    where the series' process found the program's source does not compile, before any of it ran."""

    unparsed: bool


@final
class AssertStatus(_Status):
    """An assert test's status: with its series' checker's pid, and whether the checker retired after it."""

    supervisor: int
    retired: bool
    unparsed: bool  # the checker found the program's source does not compile (its own compile)


@final
class BrokenStatus(TypedDict):
    """The series' checker did not answer: the test took it down."""

    broken: Literal[True]


class CheckerOutcome(TypedDict):
    """The checker's answer to its series' process: the tests' outcome, its CPU time, whether it retires."""

    outcome: Outcome
    cpu: float
    retired: bool


def read_run_report(raw: bytes) -> Report:
    """The box's report of a run, if it is one; else :class:`~.wire_schema.Malformed` (a ``ValueError``)."""
    return conform(json.loads(raw), Report)


def read_test_report(raw: bytes) -> SeriesReport | Broken:
    """The box's report of a test series' test, if it is one; else :class:`~.wire_schema.Malformed`."""
    report = json.loads(raw)
    if type(report) is dict and "broken" in report:
        return conform(report, Broken)
    return conform(report, SeriesReport)


def read_series_report(raw: bytes) -> TestStatus | AssertStatus | None:
    """A series' process's report of a test, if it is one; None if it is not, or says the series is broken."""
    try:
        report = json.loads(raw)
        if type(report) is dict and "supervisor" in report:
            return conform(report, AssertStatus)
        return conform(report, TestStatus)
    except (ValueError, RecursionError):  # Malformed, or no JSON
        return None


def read_outcome(raw: bytes) -> CheckerOutcome | None:
    """The checker's outcome of an assert test, if it is one; None if it is not (the checker was taken down)."""
    try:
        return conform(json.loads(raw), CheckerOutcome)
    except (ValueError, RecursionError):
        return None
