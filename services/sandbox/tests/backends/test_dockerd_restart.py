"""The docker backend survives a restart of the engine itself, without a server restart.

The server is a real ``codegym-sandbox serve`` process on loopback: the test sees only what a client sees.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sandbox_support import IMAGE, settings_for

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too


def _restart_dockerd() -> None:
    """Stop the engine and start it again with the command line it had (as ``scripts/engines`` starts it)."""
    pid = int(subprocess.run(["pidof", "dockerd"], capture_output=True, text=True, check=True).stdout.split()[0])
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    subprocess.run(["kill", str(pid)], check=True)
    deadline = time.monotonic() + 60
    while subprocess.run(["pidof", "dockerd"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "dockerd did not stop"
        time.sleep(0.2)
    with open("/tmp/codegym-dockerd.log", "ab") as log:  # setsid -f: the engine outlives this test, unwaited
        subprocess.run(["setsid", "-f", *argv], stdout=log, stderr=log, check=True)
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "dockerd did not come back"
        time.sleep(0.5)


def _run(url: str, code: str) -> dict[str, object]:
    r = httpx.post(f"{url}/run_code", json={"code": code, "language": "python"}, timeout=60)
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


def test_pool_recovers_from_a_dockerd_restart() -> None:
    settings_for("docker")  # skips (or fails under CI) when the docker backend cannot run here
    if subprocess.run(["pidof", "dockerd"], capture_output=True).returncode != 0:
        pytest.fail("docker answers but no dockerd runs on this host: cannot restart the engine here")
    env = {"CODEGYM_SANDBOX_IMAGE": IMAGE, "CODEGYM_SANDBOX_BREAKER_COOLDOWN_S": "1"}
    server = ServerProcess(env, ["--backend", "docker", "--workers", "2", "--log-level", "warning"])
    server.start(ready_timeout=120)  # a busy machine starts containers slowly
    url = server.url
    try:
        assert _run(url, "print('before')")["status"] == "Success"
        _restart_dockerd()
        # Every container died with the engine: the pool notices, rebuilds them, and the server stays up.
        deadline = time.monotonic() + 90
        while (body := _run(url, "print('after')"))["status"] != "Success":
            assert body["status"] == "SandboxError", body
            assert time.monotonic() < deadline, f"no recovery after the restart: {body}"
            time.sleep(0.5)
        assert body["run_result"]["stdout"] == "after\n"  # type: ignore[index]
        while (ready := httpx.get(f"{url}/readyz", timeout=5).json())["alive"] < 2 or ready["broken_slots"]:
            assert time.monotonic() < deadline, f"the pool did not heal: {ready}"
            time.sleep(0.2)
        assert server.proc is not None and server.proc.poll() is None, "the server must live through the restart"
    finally:
        server.stop()
