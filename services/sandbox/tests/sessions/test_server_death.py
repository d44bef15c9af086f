"""A server killed outright (``kill -9``, the OOM killer, a job's time limit) leaves no session behind, and one
asked to stop (SIGTERM) stops within its grace, however long its cells would run.

Between cells a session's processes are stopped (``agent/session_pause.py``), and a stopped box cannot see its
agent go: before the box armed a parent-death signal, every held session of a killed server, and every kernel
started ahead, stayed on the host for good, stopped, holding its memory. A server of the local backend runs
here as its own process, so that it can be killed like that; on the container backends a session's box ends
with its container, whose init is the agent, and that must see its server go.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sandbox_support import IMAGE, backend_problem, unavailable

HOST = "127.0.0.1"


def _port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _processes_of(server: int) -> dict[int, str]:
    """The processes of ``server``'s workers and their states: every one is forked from the zygote, whose argv
    ends with the pid of its server (``backends/zygote.py``)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        except OSError:
            continue
        if b"codegym_sandbox.agent.worker_zygote" in argv and argv[-2:-1] == [str(server).encode()]:
            found[int(entry)] = state
    return found


@contextmanager
def _server(backend: str = "local", **env: str) -> Iterator[tuple[subprocess.Popen[bytes], http.client.HTTPConnection]]:
    port = _port()
    argv = [sys.executable, "-m", "codegym_sandbox.cli", "serve", "--host", HOST, "--port", str(port)]
    if backend != "local":
        env = {"CODEGYM_SANDBOX_IMAGE": IMAGE, **env}
    proc = subprocess.Popen(
        [*argv, "--backend", backend, "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **env},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            conn = http.client.HTTPConnection(HOST, port, timeout=30)
            try:
                conn.request("GET", "/readyz")
                ready = conn.getresponse()
                ready.read()
                if ready.status == 200:
                    break
            except OSError:
                pass  # not listening yet
            conn.close()
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
            time.sleep(0.2)
        try:
            yield proc, conn
        finally:
            conn.close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _post(conn: http.client.HTTPConnection, path: str, body: dict[str, object], want: int) -> dict[str, object]:
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    out: dict[str, object] = json.loads(r.read())
    assert r.status == want, out
    return out


def test_a_killed_server_leaves_no_session_behind() -> None:
    with _server() as (proc, conn):
        for _ in range(3):
            sid = _post(conn, "/v1/sessions", {"language": "python"}, 201)["session_id"]
            _post(conn, f"/v1/sessions/{sid}/execute", {"code": "x = [0] * 1000"}, 200)
        # Every session held (stopped) between cells, and the kernels started ahead once they run: three boxes at
        # least, each with its kernel, all stopped.
        deadline = time.monotonic() + 30
        while sum(state == "T" for state in _processes_of(proc.pid).values()) < 6:
            assert time.monotonic() < deadline, _processes_of(proc.pid)
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while left := _processes_of(proc.pid):
            assert time.monotonic() < deadline, f"left behind by the killed server: {left}"
            time.sleep(0.1)


def _pool_of(server: int) -> list[int]:
    """The processes of ``server``'s comparison pool (``judging/off_loop.py``): its children that
    ``multiprocessing`` spawned."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"multiprocessing.spawn" in argv and b"resource_tracker" not in argv and parent == server:
            found.append(int(entry))
    return found


def test_a_killed_servers_comparison_pool_ends_with_it() -> None:
    """Each process of the pool holds both ends of its executor's queue, so none saw its server go: every pool of a
    server killed outright stayed on the host, for good (round 56)."""
    with _server() as (proc, conn):
        expected = "1 " * 5000  # past what is compared on the loop: in the pool
        body = {"language": "python", "programs": ["print('1.0 ' * 5000)"], "comparison": "float"}
        answer = _post(conn, "/v1/evaluate", {**body, "tests": [{"stdin": "", "expected_stdout": expected}]}, 200)
        assert answer["results"][0]["verdict"] == "AC", answer  # type: ignore[index]
        pool = _pool_of(proc.pid)
        assert pool, "no comparison pool was started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while left := [pid for pid in pool if os.path.exists(f"/proc/{pid}")]:
            assert time.monotonic() < deadline, f"left behind by the killed server: {left}"
            time.sleep(0.1)


def _containers_of(engine: str, server: int) -> list[str]:
    """The running containers of ``server`` (labelled with its pid: ``backends/containers.py``)."""
    argv = [engine, "ps", "-q", "--filter", f"label=codegym.sandbox.pid={server}"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_killed_server_leaves_no_container_running(engine: str) -> None:
    """On the container backends a session is its container, whose init is the agent: it must see its server go.
    A docker container kept its stdin open once its attached client was gone, and every container of a killed
    server ran on, its sessions' with their interpreters and files, until a later docker server swept them."""
    problem = backend_problem(engine)
    if problem is not None:
        unavailable(engine, problem)
    with _server(engine, CODEGYM_SANDBOX_SESSIONS__WARM="0") as (proc, conn):
        sid = _post(conn, "/v1/sessions", {"language": "python"}, 201)["session_id"]
        _post(conn, f"/v1/sessions/{sid}/execute", {"code": "secret = 'x' * 1000"}, 200)
        _post(conn, "/v1/execute", {"language": "python", "code": "print(1)"}, 200)
        assert len(_containers_of(engine, proc.pid)) >= 2  # the session's and the pool's slot
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while left := _containers_of(engine, proc.pid):
            if time.monotonic() > deadline:
                subprocess.run([engine, "rm", "-f", *left], capture_output=True, check=False)
                raise AssertionError(f"left running by the killed server: {left}")
            time.sleep(0.2)


def test_a_stopped_server_ends_its_cells_at_its_grace() -> None:
    # A cell of a minute, and two more queued on the same NeMo-Skills id behind it: without a grace the server
    # would serve all three, one after another, before it stopped.
    with _server(CODEGYM_SANDBOX_SHUTDOWN_GRACE_S="2") as (proc, conn):
        port = conn.port

        def cell() -> None:
            c = http.client.HTTPConnection(HOST, port, timeout=120)
            body = {"generated_code": "import time\ntime.sleep(60)", "language": "ipython", "timeout": 60}
            try:
                c.request(
                    "POST", "/execute", json.dumps(body), {"X-Session-ID": "long", "Content-Type": "application/json"}
                )
                c.getresponse().read()
            except OSError:
                pass  # the server went away: what a stop within its grace does to a cell still running
            finally:
                c.close()

        cells = [threading.Thread(target=cell, daemon=True) for _ in range(3)]
        for t in cells:
            t.start()
            time.sleep(0.3)
        deadline = time.monotonic() + 30
        while not any(state != "T" for state in _processes_of(proc.pid).values()):
            assert time.monotonic() < deadline, "the cell never ran"
            time.sleep(0.1)
        time.sleep(1.0)
        stopped = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=40) is not None
        took = time.monotonic() - stopped
        assert took < 15, f"the server took {took:.1f} s to stop with a 2 s grace"
        deadline = time.monotonic() + 10
        while left := _processes_of(proc.pid):
            assert time.monotonic() < deadline, f"left behind by the stopped server: {left}"
            time.sleep(0.1)


def _cgroups() -> set[Path]:
    """The agents' cgroups on this host: each worker's memory cgroup and its runs' (``agent/memory_cgroup.py``,
    ``agent/run_cgroup.py``), under ``codegym-sandbox`` in each hierarchy."""
    parents = [*Path("/sys/fs/cgroup").glob("codegym-sandbox"), *Path("/sys/fs/cgroup").glob("*/codegym-sandbox")]
    return {child for parent in parents for child in parent.iterdir() if child.is_dir()}


def _of_server(cgroups: set[Path], agents: set[int]) -> set[Path]:
    """Those of ``cgroups`` that the server's processes (``agents``) made: a runs' cgroup on cgroup v1 is named
    for its agent (``run-PID-...``); a worker's memory cgroup holds its box, and on v2 its runs' cgroup."""
    mine = set()
    for cgroup in cgroups:
        pids = {int(cgroup.name.split("-")[1])} if cgroup.name.startswith("run-") else set()
        for procs in (cgroup / "cgroup.procs", cgroup / "run" / "cgroup.procs"):
            if procs.exists():
                pids |= {int(pid) for pid in procs.read_text().split()}
        if pids & agents:
            mine.add(cgroup)
    return mine


def test_a_stopped_server_leaves_no_cgroup_behind() -> None:
    # Workers started ahead and parked, besides the pool's slot and a session: a stop killed every agent, and
    # every one of their cgroups stayed on the host (empty) until a later server swept them.
    before = _cgroups()
    with _server(CODEGYM_SANDBOX_RESERVE_WORKERS="4") as (proc, conn):
        sid = _post(conn, "/v1/sessions", {"language": "python"}, 201)["session_id"]
        _post(conn, f"/v1/sessions/{sid}/execute", {"code": "1"}, 200)
        _post(conn, "/v1/execute", {"language": "python", "code": "print(1)"}, 200)
        made = _of_server(_cgroups() - before, set(_processes_of(proc.pid)))
        assert len(made) >= 6, made  # a memory cgroup and a runs' cgroup each, for six workers at least
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=40) is not None
    left = made & _cgroups()
    assert not left, f"left behind by the stopped server: {sorted(map(str, left))}"
