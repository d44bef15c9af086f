"""The host's task table bounds the runs in flight: all workers' runs at their process limit leave the host
a reserve of pids (issue 32 family 2, "tables for the whole machine")."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from codegym_sandbox.backends import tasks
from codegym_sandbox.backends.host import host_checks
from codegym_sandbox.cli import main
from codegym_sandbox.config import Limits, Sessions, Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient


def reader(numbers: dict[str, int | None]) -> tasks.Reader:
    return lambda path: numbers[path.rsplit("/", 1)[-1]]


def test_the_capacity_is_the_lower_table_less_the_hosts_reserve() -> None:
    assert tasks.host_tasks(reader({"pid_max": 32768, "threads-max": 192730})) == 32768
    assert tasks.host_tasks(reader({"pid_max": 4194304, "threads-max": 60000})) == 60000
    assert tasks.host_tasks(reader({"pid_max": None, "threads-max": 60000})) == 60000
    assert tasks.host_tasks(reader({"pid_max": None, "threads-max": None})) is None
    assert tasks.capacity(32768) == 32768 - 4096  # an eighth for the host
    assert tasks.capacity(12288) == 12288 - 4096  # at least 4096
    assert tasks.capacity(4000) == 0


def test_max_workers_times_the_process_limit_fits_in_the_capacity() -> None:
    table = reader({"pid_max": 32768, "threads-max": 192730})
    # Without sessions: 128 runs x 256 processes = 32768 = pid_max, the whole table (issue 32's S2).
    none = Sessions(max_sessions=0, warm=0)
    bound = tasks.slots(Settings(backend="local", workers=2, sessions=none), "local", table)
    assert (bound.workers, bound.most, bound.asked, bound.lowered) == (2, 112, 128, True)
    assert bound.most * 256 <= tasks.capacity(32768)
    assert "lowered from 128 to 112" in bound.describe()
    # The default 64 sessions and 2 kernels started ahead hold 16 processes each, and their worker's 3: 1254
    # tasks come off first.
    bound = tasks.slots(Settings(backend="local", workers=2), "local", table)
    assert bound.most == (tasks.capacity(32768) - 66 * 19) // 256 == 107
    many = Settings(backend="local", workers=2, sessions=Sessions(max_sessions=1000, processes=8))
    assert tasks.slots(many, "local", table).most == (tasks.capacity(32768) - 1002 * 11) // 256 == 68
    small = Settings(backend="local", workers=2, limits=Limits(processes=64))
    assert (tasks.slots(small, "local", table).most, tasks.slots(small, "local", table).lowered) == (128, False)
    # A container's pids limit counts its agent too; the fixed workers are lowered with the rest where needed.
    bound = tasks.slots(Settings(workers=200, max_workers=400, sessions=none), "docker", table)
    assert (bound.per_run, bound.most, bound.workers) == (320, 89, 89)  # 28672 // 320
    unknown = tasks.slots(Settings(workers=2), "local", reader({"pid_max": None, "threads-max": None}))
    assert (unknown.most, unknown.lowered) == (128, False)


@pytest.fixture
def small_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose pid table is 12288 (capacity 8192: 32 runs of 256 processes), and a server without
    sessions."""
    monkeypatch.setenv("CODEGYM_SANDBOX_SESSIONS__MAX_SESSIONS", "0")
    monkeypatch.setenv("CODEGYM_SANDBOX_SESSIONS__WARM", "0")
    (tmp_path / "pid_max").write_text("12288\n")
    (tmp_path / "threads-max").write_text("192730\n")
    monkeypatch.setattr(tasks, "TABLES", (str(tmp_path / "pid_max"), str(tmp_path / "threads-max")))


@pytest.mark.usefixtures("small_table")
def test_a_server_lowers_its_runs_in_flight_to_the_table_and_says_so(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(backend="local", workers=1, max_workers=40, reserve_workers=0)
    assert settings.sessions.max_sessions == 0
    with caplog.at_level(logging.INFO, logger="codegym.sandbox"), TestClient(create_app(settings)) as client:
        body = client.get("/readyz").json()
    assert body["ready"] and body["max_workers"] == 32 and body["workers"] == 1
    (logged,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("host checks:")]
    assert "capacity:" in logged and "runs in flight lowered from 40 to 32" in logged
    assert "8192 of the host's 12288 tasks" in logged and "every fork on it would fail" in logged

    assert main(["doctor", "--backend", "local", "--no-run", "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    capacity = checks["capacity"]
    assert capacity["status"] == "warn" and "up to 32 runs in flight" in capacity["found"]
    assert "kernel.pid_max" in capacity["fix"] and "LIMITS__PROCESSES" in capacity["fix"]
    # Within the table, nothing is lowered and the capacity line says what fits.
    roomy = host_checks(Settings(backend="local", workers=1, max_workers=32), "local")[-1]
    assert roomy.status == "info" and "32 runs in flight fit in 8192 of the host's 12288 tasks" in roomy.found


def test_a_max_workers_below_the_workers_leaves_the_workers_where_the_table_has_room() -> None:
    table = reader({"pid_max": 4194304, "threads-max": 192730})
    bound = tasks.slots(Settings(backend="local", workers=2, max_workers=1), "local", table)
    assert (bound.workers, bound.most, bound.lowered) == (2, 1, False)
