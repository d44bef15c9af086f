"""``codegym-sandbox doctor`` and the start-up checks: what the machine lacks is said before anything fails, and
a server that cannot isolate refuses to start.

A host without user namespaces is made for real: a user namespace of the test's own whose
``user.max_user_namespaces`` is 0, so every namespace the server would make below it is refused by the kernel.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from codegym_sandbox.backends.host import SETUP_INSTALLS, Check, host_checks, refusal, startup_lines, toolchain_fix
from codegym_sandbox.cli import main
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

CLI = [sys.executable, "-m", "codegym_sandbox.cli"]
NAMES = {"user namespaces", "seccomp", "cgroups", "runtime packages", "toolchains", "capacity", "docker", "gVisor"}


def without_user_namespaces(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``argv`` on a host that refuses user namespaces (a namespace of its own, its limit set to 0)."""
    if shutil.which("unshare") is None:
        pytest.fail("util-linux's unshare is needed to make a host without user namespaces")
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    return subprocess.run(
        ["unshare", "-Ur", "sh", "-c", script, "sh", *argv], capture_output=True, text=True, timeout=timeout
    )


def test_doctor_reports_every_check_and_runs_a_program_isolated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--backend", "local", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "local" and report["healthy"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) >= NAMES
    assert checks["user namespaces"]["status"] == "ok"
    run = checks["a run"]
    assert run["status"] == "ok"
    # The program ran as the box's program uid, seeing its own pid namespace's /proc, not the host's.
    assert "ran as uid" in run["found"] and f"as uid {os.getuid()} " not in run["found"]
    for check in report["checks"]:
        if check["status"] in ("missing", "warn"):
            assert check["costs"] and check["fix"], check  # what is missing says what it costs, and the fix


def test_doctor_prints_a_readable_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--backend", "local", "--no-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("codegym-sandbox doctor:")
    assert "backend: local (asked for local)" in out
    assert "result: programs run isolated on the local backend" in out
    assert "memory budget of" in out


def test_without_user_namespaces_doctor_says_what_is_missing_what_it_costs_and_the_fix() -> None:
    done = without_user_namespaces([*CLI, "doctor", "--backend", "local", "--json"])
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["healthy"] is False
    userns = next(c for c in report["checks"] if c["name"] == "user namespaces")
    assert userns["status"] == "missing" and "refused" in userns["found"]
    assert "refuses to start" in userns["costs"] and "user.max_user_namespaces" in userns["fix"]
    assert "a run" not in {c["name"] for c in report["checks"]}  # nothing is run where nothing can be isolated


def test_a_server_that_cannot_isolate_refuses_to_start_and_says_why() -> None:
    done = without_user_namespaces([*CLI, "serve", "--backend", "local", "--port", "0", "--workers", "1"])
    assert done.returncode != 0
    assert "the local backend cannot isolate programs on this host" in done.stderr
    assert "never runs programs unisolated" in done.stderr and "codegym-sandbox doctor" in done.stderr


def test_the_start_up_message_names_what_falls_short_and_its_cost(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(backend="local", workers=1, reserve_workers=0)
    checks = host_checks(settings, "local")
    assert refusal(checks) is None  # this host isolates
    short = Check("cgroups", "warn", "no cgroup file system mounted", "memory held by process sizes", "run as root")
    line = startup_lines([*checks[:1], short])
    assert "cgroups: no cgroup file system mounted (costs: memory held by process sizes)" in line
    assert "codegym-sandbox doctor" in line
    assert startup_lines(checks[:1]).startswith("host checks: all ok")
    refused = Check("user namespaces", "missing", "refused: user namespaces: [Errno 28]", "x", "y")
    message = refusal([refused])
    assert message is not None and "refused: user namespaces: [Errno 28]" in message

    app = create_app(settings)
    with caplog.at_level(logging.INFO, logger="codegym.sandbox"), TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
    (logged,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("host checks:")]
    assert logged == startup_lines(checks)


def test_the_fix_for_a_missing_toolchain_is_the_command_that_installs_it() -> None:
    assert toolchain_fix({"go"}) == "apt-get install golang-go"
    assert toolchain_fix({"ruby", "javac"}) == (
        "scripts/setup toolchains (Debian's packages, as root); apt-get install default-jdk-headless"
    )
    # What the set-up's toolchains part installs, as scripts/setup lists it (command:package pairs).
    setup = (Path(__file__).resolve().parents[3] / "scripts" / "setup").read_text()
    (listed,) = re.findall(r"for pair in (.*?); do", setup, flags=re.S)
    commands = {pair.split(":")[0] for pair in listed.replace("\\\n", " ").split()}
    assert commands and commands <= SETUP_INSTALLS
