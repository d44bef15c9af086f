"""Sessions, attacked: a hostile cell cannot reach another session, a run, the server or the host; what it
holds counts against its own limits; and when its session ends, nothing of it is left.

The families runs have, in a session's cells: a fork bomb, files past the memory limit, a cell that kills its
own interpreter, one that sleeps forever (and one that will not be interrupted), one that reads ``/proc``
for other sessions, one that leaves a child running after it ends, and one that signals every process it
can. Each session is a worker of its own (``backends/session_lease.py``): a host user of its own, its own
namespaces and memory cgroup, ended with the session.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from .host_state import HostState
from .suite import PROGRAM_HOST_UID, SERVER_SECRET, hostile_settings


@pytest.fixture(scope="module")
def server(backend: str, host: HostState) -> Iterator[TestClient]:
    settings = hostile_settings(backend, main=True)
    settings.sessions.memory_mb = 128
    settings.sessions.warm = 0
    settings.sessions.max_sessions = 6
    settings.sessions.max_sessions_per_client = 6
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c
    assert host.problems() == []


def _new(client: TestClient, **body: Any) -> str:
    r = client.post("/v1/sessions", json={"language": "python", **body})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


def _cell(client: TestClient, sid: str, code: str, timeout_s: float = 5) -> dict[str, Any]:
    r = client.post(f"/v1/sessions/{sid}/execute", json={"code": code, "timeout_s": timeout_s})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _session_processes() -> list[int]:
    """Host pids of every session's programs: their users follow the runs' (one per worker slot)."""
    found = []
    for uid in range(PROGRAM_HOST_UID + 1, PROGRAM_HOST_UID + 16):
        found += HostState.program_processes_of(uid)
    return found


def _still_fine(client: TestClient, sid: str | None = None) -> None:
    """A run and (where given) another session still work as before."""
    r = client.post("/v1/execute", json={"language": "python", "code": "print(6 * 7)"})
    assert r.status_code == 200 and r.json()["run"]["stdout"] == "42\n", r.text
    if sid is not None:
        assert _cell(client, sid, "canary")["display"] == "'alive'"


@pytest.fixture
def bystander(server: TestClient) -> Iterator[str]:
    sid = _new(server)
    _cell(server, sid, "canary = 'alive'\nopen('mine.txt', 'w').write('bystander')")
    yield sid
    server.delete(f"/v1/sessions/{sid}")


def test_a_fork_bomb_in_a_cell_stays_in_its_session(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    bomb = (
        "import os\nmade = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time\n"
        "            time.sleep(60)\n            os._exit(0)\n        made += 1\nexcept OSError:\n    pass\nmade"
    )
    out = _cell(server, sid, bomb)
    assert out["alive"] and int(out["display"]) < 32, out  # its process limit, not the host's table
    _still_fine(server, bystander)
    server.delete(f"/v1/sessions/{sid}")


def test_files_past_the_limit_are_the_sessions_own_failure(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    code = "for i in range(64):\n    with open(f'big{i}', 'wb') as f:\n        f.write(b'x' * (16 << 20))\n"
    out = _cell(server, sid, code, timeout_s=20)
    assert out["status"] in ("memory_limit", "finished") and out["error"] is not None, out
    _still_fine(server, bystander)
    server.delete(f"/v1/sessions/{sid}")


def test_children_past_the_memory_limit_end_the_session_as_memory_limit(server: TestClient, bystander: str) -> None:
    # Each child within the session's 128 MiB, together past it: the kernel kills one for memory, and the one
    # left holds less than the limit. The cell read "finished" and the session went on, its survivor with it.
    sid = _new(server)
    code = (
        "import os, time\nfor _ in range(2):\n    if os.fork() == 0:\n        held = b'x' * (100 << 20)\n"
        "        time.sleep(30)\n        os._exit(0)\n    time.sleep(0.5)\ntime.sleep(1)\n'done'"
    )
    out = _cell(server, sid, code, timeout_s=10)
    assert out["status"] == "memory_limit" and not out["alive"], out
    assert "memory" in out["error"]["message"], out
    _still_fine(server, bystander)


def test_cells_close_together_leave_nothing_computing_between_them(server: TestClient) -> None:
    # A child a cell left spinning, then cells 20 ms apart: the session's processes ran on for 50 ms after each
    # answer, so the child computed between every two cells, outside any slot of the pool.
    sid = _new(server)
    spin = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "def cpu():\n    f = open(f'/proc/{child.pid}/stat').read().rsplit(')', 1)[1].split()\n"
        "    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')\n"
        "time.sleep(0.3)\nbefore = cpu()\nbefore > 0.05"
    )
    assert _cell(server, sid, spin)["display"] == "True"
    began = time.monotonic()
    for _ in range(40):
        _cell(server, sid, "pass")
        time.sleep(0.02)
    took = time.monotonic() - began
    ran = float(_cell(server, sid, "cpu() - before")["display"])
    assert ran < took / 3, (ran, took)  # it ran while its session's cells did, not between them
    server.delete(f"/v1/sessions/{sid}")


# A child that asks for SIGCONT every 5 ms from a POSIX timer of its own (a handler keeps the timer armed), then
# spins: the stop between cells held it for one tick; it computed through every idle second of its session.
_WOKEN_BY_TIMER = """
import ctypes, fcntl, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
class Event(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48)]
class Spec(ctypes.Structure):
    _fields_ = [("interval", ctypes.c_long * 2), ("value", ctypes.c_long * 2)]
refused = []
r, w = os.pipe()
try:
    fcntl.fcntl(r, 10, signal.SIGCONT)  # F_SETSIG: an I/O signal of SIGCONT
except OSError:
    refused.append("F_SETSIG")
child = os.fork()
if child == 0:
    signal.signal(signal.SIGCONT, lambda *a: None)
    timer = ctypes.c_void_p()
    if libc.timer_create(1, ctypes.byref(Event(None, signal.SIGCONT, 0)), ctypes.byref(timer)) == 0:
        libc.timer_settime(timer, 0, ctypes.byref(Spec((0, 5_000_000), (0, 5_000_000))), None)
    while True:
        pass
"""


def test_an_idle_session_computes_nothing_even_woken_by_its_own_signals(server: TestClient) -> None:
    sid = _new(server)
    cpu = (
        "def cpu():\n    f = open(f'/proc/{child}/stat').read().rsplit(')', 1)[1].split()\n"
        "    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')\n"
    )
    out = _cell(server, sid, _WOKEN_BY_TIMER + cpu + "time.sleep(0.2)\nbefore = cpu()\nrefused")
    assert out["display"] == "['F_SETSIG']", out
    time.sleep(2)
    ran = float(_cell(server, sid, "cpu() - before")["display"])
    assert ran < 0.5, ran  # it ran during the last cell at most, not through the idle 2 s
    server.delete(f"/v1/sessions/{sid}")


# A child whose parent ends, freeing 300 MB, just as the cell answers: the end continues the child (its
# PR_SET_PDEATHSIG is SIGCONT) and moves it to the box between two reads of the tree, and the stop once saw every
# process stopped while it ran (1 try in 4 to 10). The stop now reads the box's own /proc, and twice.
_PARENT_ENDS = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
if os.fork() == 0:
    child = os.fork()
    if child == 0:
        libc.prctl(1, signal.SIGCONT, 0, 0, 0)  # PR_SET_PDEATHSIG
        while True:
            pass
    big = b"x" * (300 << 20)
    os.write(ready_w, b"%d\\n" % child)
    os.read(go_r, 1)
    os._exit(0)
for _ in range(8):
    if os.fork() == 0:
        while True:
            time.sleep(100)
child = int(os.read(ready_r, 64))
os.write(go_w, b"g")
time.sleep(0.01)
"""


def test_an_idle_session_computes_nothing_when_a_parent_ends_as_it_stops(server: TestClient) -> None:
    cpu = "f = open(f'/proc/{child}/stat').read().rsplit(')', 1)[1].split()\n(int(f[11]) + int(f[12])) / 100"
    for _ in range(6):
        sid = _new(server, limits={"memory_mb": 1024})
        _cell(server, sid, _PARENT_ENDS)
        time.sleep(2)
        ran = float(_cell(server, sid, cpu)["display"])  # all its life: the first cell's time, and no idle second
        server.delete(f"/v1/sessions/{sid}")
        assert ran < 1.2, ran


def test_a_cell_that_kills_its_interpreter_ends_only_its_session(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    out = _cell(server, sid, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert out["status"] == "killed" and not out["alive"], out
    _still_fine(server, bystander)


def test_a_cell_that_will_not_stop_ends_its_session_and_nothing_else(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    code = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)\n"
    started = time.monotonic()
    out = _cell(server, sid, code, timeout_s=1)
    assert out["status"] == "time_limit" and not out["alive"], out
    assert time.monotonic() - started < 15
    _still_fine(server, bystander)


# A cell that leaves a process waiting in a vfork (posix_spawn's child blocks opening a fifo before its exec): no
# stop reaches the parent, which waits in the kernel. The stop holds its child, and so the parent as well (it runs
# nothing until its child is continued: agent/vfork_wait.py, which reads the parent's /proc/PID/syscall, another
# user's: a session's container gives its agent CAP_SYS_PTRACE for forks), and the session is held between cells as
# any other, on every backend.
_LEAVES_A_VFORK = """
import os, subprocess, sys, time
FIFO = os.path.join(os.getcwd(), "fifo")
os.mkfifo(FIFO)
spawn = "import os; os.posix_spawn('/bin/true', ['true'], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 5, %r, 0, 0)])"
spawned = subprocess.Popen([sys.executable, "-c", spawn % FIFO])
time.sleep(0.5)  # in its vfork by now
"""


def test_a_process_waiting_in_a_vfork_is_held_with_its_child(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    assert _cell(server, sid, _LEAVES_A_VFORK)["alive"]
    time.sleep(2.0)  # idle: held stopped (a stop between cells that could not hold it would end the session)
    out = _cell(server, sid, "spawned.poll() is None")
    assert out["status"] == "finished" and out["alive"] and out["display"] == "True", out  # still in its vfork
    server.delete(f"/v1/sessions/{sid}")
    _still_fine(server, bystander)


# A process whose leader waits in a vfork (its child blocks before its exec, then stands stopped) and whose other
# thread computes: a stop sent to the process goes to the leader, which cannot take it, and the group stop never
# started: the thread computed between cells (round 55: 6 CPU-s in 6 s idle). Each running thread now gets a stop.
_COMPUTES_BESIDE_A_VFORK = """
import os, subprocess, sys, time
FIFO = os.path.join(os.getcwd(), "fifo2")
os.mkfifo(FIFO)
child = (
    "import os, threading\\n"
    "def spin():\\n    while True:\\n        pass\\n"
    "threading.Thread(target=spin, daemon=True).start()\\n"
    "os.posix_spawn('/bin/true', ['true'], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 5, %r, 0, 0)])" % FIFO
)
spinner = subprocess.Popen([sys.executable, "-c", child])
time.sleep(0.5)
def ticks():
    with open(f"/proc/{spinner.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
"""


def test_a_thread_beside_a_process_waiting_in_a_vfork_computes_nothing_between_cells(
    server: TestClient, bystander: str
) -> None:
    sid = _new(server)
    assert _cell(server, sid, _COMPUTES_BESIDE_A_VFORK)["alive"]
    assert _cell(server, sid, "before = ticks()\nspinner.poll() is None")["display"] == "True"
    time.sleep(1.5)  # idle: held stopped
    out = _cell(server, sid, "ticks() - before")
    assert out["status"] == "finished" and out["alive"], out  # held: not ended at this cell as unstoppable
    assert int(out["display"]) < 50, out  # clock ticks (1/100 s): the cells' own time, not 1.5 s idle
    server.delete(f"/v1/sessions/{sid}")
    _still_fine(server, bystander)


def test_a_session_sees_no_other_session_in_proc(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    code = (
        "import os\nseen = []\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n"
        "            seen.append(open(f'/proc/{p}/cmdline', 'rb').read())\n        except OSError:\n            pass\n"
        "found = [p for p in seen if b'canary' in p or b'bystander' in p]\n"
        "secret = os.environ.get('CODEGYM_SECURITY_TEST_SECRET')\n(len(seen) < 8, found, secret)"
    )
    assert _cell(server, sid, code)["display"] == "(True, [], None)"
    code = "import os\n(os.path.exists('mine.txt'), 'canary' in globals())"
    assert _cell(server, sid, code)["display"] == "(False, False)"
    code = "try:\n    e = open('/proc/self/environ').read()\nexcept OSError as x:\n    e = repr(x)\ne"
    assert SERVER_SECRET not in _cell(server, sid, code)["display"]
    server.delete(f"/v1/sessions/{sid}")


def test_a_cell_that_signals_everything_reaches_only_its_own(server: TestClient, bystander: str) -> None:
    sid = _new(server)
    out = _cell(server, sid, "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    e")
    _still_fine(server, bystander)
    if out["alive"]:
        server.delete(f"/v1/sessions/{sid}")


_FORGED = (
    "import json, os, sys\nf = sys._getframe()\nwhile 'request' not in f.f_locals:\n    f = f.f_back\n"
    "ask = f.f_locals['request']\nbody = json.dumps({**ask, 'source': None, 'stdin': None, 'display': "
    "[{'text/plain': \"'forged'\"}], 'error': [], 'cut': False}).encode()\n"
)
_FORGERIES = {
    # A child of the kernel answers for it, with the cell's own nonce (read from the kernel's frame).
    "a child's answer": (
        _FORGED + "if os.fork() == 0:\n    os.write(4, b'%d\\n' % len(body) + body)\n"
        "    os._exit(0)\nos.wait()\nimport time\ntime.sleep(1)\n'real'",
        "another process",
    ),
    # An answer written after the cell's own: waiting for the next cell, or (its thread stopped with the session
    # between cells) written while the next one runs, before that cell's answer.
    "an answer ahead": (
        "import os, threading\nthreading.Timer(0.01, os.write, (4, b'2\\n{}')).start()",
        "not (given|one)",
    ),
    "an answer too large": ("import os\nos.write(4, b'99999999999\\n')\nimport time\ntime.sleep(1)", "not one"),
    "its channel closed": ("import os\nos.close(4)", ""),
}


@pytest.mark.parametrize("forgery", sorted(_FORGERIES))
def test_no_answer_but_the_kernels_own_for_its_cell_passes(server: TestClient, bystander: str, forgery: str) -> None:
    """The agent records a cell; what the kernel's children, an earlier cell or a broken channel write is never
    the cell's answer: the session ends, and says why."""
    code, why = _FORGERIES[forgery]
    sid = _new(server)
    out = _cell(server, sid, code)
    if out["alive"]:  # written after its own answer: the next cell finds it
        # The session is stopped between cells, so a write its first cell left pending may come only once the
        # next cell runs: that cell waits long enough for it to come before its own answer.
        out = _cell(server, sid, "import time\ntime.sleep(0.5)\n'next'")
    assert not out["alive"] and out["display"] is None and out["status"] == "killed", out
    assert out["error"]["type"] == "SessionEnded" and re.search(why, out["error"]["message"]), out
    _still_fine(server, bystander)


def test_a_child_left_running_ends_with_its_session(server: TestClient) -> None:
    before = set(_session_processes())
    sid = _new(server)
    code = "import subprocess\np = subprocess.Popen(['sleep', '300'])\np.pid > 0"
    assert _cell(server, sid, code)["display"] == "True"
    assert _cell(server, sid, "p.poll() is None")["display"] == "True"  # it lives on between cells
    assert set(_session_processes()) - before, "the session's processes are not its own host user's"
    assert server.delete(f"/v1/sessions/{sid}").status_code == 204
    deadline = time.monotonic() + 10
    while set(_session_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(_session_processes()) - before, "a session's process outlived it"


def test_sessions_take_their_memory_from_the_budget(backend: str, host: HostState) -> None:
    settings = hostile_settings(backend, memory_budget_mb=700)
    settings.sessions.memory_mb, settings.sessions.warm, settings.sessions.memory_share = 256, 0, 1.0
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        held = [_new(client), _new(client)]
        r = client.post("/v1/sessions", json={"language": "python"})
        assert r.status_code in (429, 503) and int(r.headers["Retry-After"]) > 0, r.text
        client.delete(f"/v1/sessions/{held.pop()}")
        held.append(_new(client))  # its memory came back with the session
        for sid in held:
            client.delete(f"/v1/sessions/{sid}")


def _two_fit(client: TestClient, share: float) -> dict[str, Any]:
    """A session's limits such that two of them fill ``share`` of the budget, each charged its worker's cost too
    (a container's, ``backends/worker_cost.py``): a third passes it."""
    ready = client.get("/readyz").json()
    return {"memory_mb": int(ready["memory_budget_mb"] * share) // 2 - ready["worker_cost_mb"]}


def test_sessions_hold_no_more_than_their_share_of_the_budget(backend: str, host: HostState) -> None:
    settings = hostile_settings(backend, memory_budget_mb=1000)
    settings.sessions.warm, settings.sessions.memory_share = 0, 0.5
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        limits = _two_fit(client, 0.5)
        held = [_new(client, limits=limits), _new(client, limits=limits)]
        r = client.post("/v1/sessions", json={"language": "python", "limits": limits})
        assert r.status_code == 429 and "SESSIONS__MEMORY_SHARE" in r.json()["detail"], r.text
        # The runs still have the rest: one of 450 MiB runs beside the idle sessions.
        body = {"language": "python", "code": "print(1)", "limits": {"memory_mb": 450}}
        assert client.post("/v1/execute", json=body).json()["verdict"] == "AC"
        for sid in held:
            client.delete(f"/v1/sessions/{sid}")


def test_one_client_holds_no_more_than_its_share_of_the_sessions_memory(backend: str, host: HostState) -> None:
    """Where clients of several tenants share a server, one of them does not hold every session's memory (for an
    hour, the sessions' lifetime): its sessions hold SESSIONS__CLIENT_MEMORY_SHARE of the sessions' at most."""
    settings = hostile_settings(backend, memory_budget_mb=1000)
    settings.sessions.warm, settings.sessions.memory_share = 0, 1.0
    settings.sessions.client_memory_share = 0.5
    greedy, other = {"X-Forwarded-For": "10.0.0.1"}, {"X-Forwarded-For": "10.0.0.2"}
    app = create_app(settings)
    # A proxy in front names each client, as `codegym-sandbox serve` with TRUSTED_PROXIES takes its word.
    served: Any = ProxyHeadersMiddleware(app, trusted_hosts=["127.0.0.1"])  # type: ignore[arg-type]
    with TestClient(served, raise_server_exceptions=False, client=("127.0.0.1", 5000)) as client:
        size = _two_fit(client, 0.5)["memory_mb"]

        def new(headers: dict[str, str], memory_mb: int = size) -> Any:
            return client.post("/v1/sessions", json={"limits": {"memory_mb": memory_mb}}, headers=headers)

        held = [new(greedy).json()["session_id"], new(greedy).json()["session_id"]]
        r = new(greedy)
        assert r.status_code == 429 and "SESSIONS__CLIENT_MEMORY_SHARE" in r.json()["detail"], r.text
        assert new(greedy, 700).status_code == 429
        r = new(other)  # another client's session still has room
        assert r.status_code == 201, r.text
        for headers, sid in [(greedy, held[0]), (greedy, held[1]), (other, r.json()["session_id"])]:
            assert client.delete(f"/v1/sessions/{sid}", headers=headers).status_code == 204
        assert not app.state.sessions.opening_mb_by


@pytest.mark.parametrize("limits", [{"memory_mb": -20000}, {"memory_mb": 0}, {"cell_timeout_s": -1}])
def test_limits_that_are_no_limits_are_refused(server: TestClient, limits: dict[str, Any]) -> None:
    assert server.post("/v1/sessions", json={"limits": limits}).status_code == 422
    r = server.post(
        "/v1/sessions", content=b'{"limits": {"cell_timeout_s": NaN}}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text


def test_busy_cells_take_the_cpus_as_runs_do_and_no_neighbour_times_out(server: TestClient) -> None:
    # Cells that compute at once, more of them than CPUs: each takes a slot of the pool as a run does, so they
    # and a run beside them compute no more at once than the slots allow; none is stretched past its limit by
    # the others, and the run that needs 0.6 s of its 1 s gets them (it was TLE when cells came in at will).
    cpus = len(os.sched_getaffinity(0))
    sids = [_new(server) for _ in range(min(2 * cpus + 1, 5))]
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\n'spun'"
    cells: list[dict[str, Any]] = [{}] * len(sids)

    def cell(i: int) -> None:
        cells[i] = _cell(server, sids[i], spin, timeout_s=3)

    threads = [threading.Thread(target=cell, args=(i,)) for i in range(len(sids))]
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)
        need = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\nprint('done')"
        run = server.post("/v1/execute", json={"language": "python", "code": need, "limits": {"timeout_s": 1}})
        for t in threads:
            t.join()
        assert run.status_code == 200 and run.json()["verdict"] == "AC", run.text
        for out in cells:
            assert out["status"] == "finished" and out["display"] == "'spun'", out
            assert out["execution_time"] < 3, out  # a cell's time is its own: its wait for a slot is not in it
    finally:
        for sid in sids:
            server.delete(f"/v1/sessions/{sid}")
