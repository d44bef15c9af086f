"""What a client can make the server hold: after it has gone, queued and running runs, workers; while it
waits, the outputs and inputs of its runs.

A client that disconnects gets its runs cancelled: queued ones leave the queue, running ones have their
worker replaced, and nothing of them reaches the result cache. The next client is served at once. (The
result cache's byte bound is tested in-process, in ``services/sandbox/tests/test_cache.py``.) What programs
print is held for one exchange with a worker, never for a whole request, and a test's stdin once for every
program of a request; and a client's outputs wait for the comparison pool in its turn with other clients'.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_bench import HOST, ServerProcess

from .suite import settings_for

SLEEPER = "import time\ntime.sleep(30)\n"  # far longer than the test: only a cancellation ends it in time


@pytest.fixture()
def server(backend: str) -> Iterator[ServerProcess]:
    """A server with two workers on ``backend`` (skipped loudly where it cannot run), and no more: these tests
    count workers, restarts and queued runs of a fixed pool (lending has tests of its own)."""
    image = settings_for(backend).image
    env = {
        "CODEGYM_SANDBOX_BACKEND": backend,
        "CODEGYM_SANDBOX_WORKERS": "2",
        "CODEGYM_SANDBOX_MAX_WORKERS": "2",
        "CODEGYM_SANDBOX_IMAGE": image,
        # Exchanges of 8 tests at the output limit: what the test of held output measures against.
        "CODEGYM_SANDBOX_EXCHANGE_OUTPUT_BYTES": str(64 << 20),
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start(ready_timeout=120)
    try:
        yield server
    finally:
        server.stop()


def _open_request(server: ServerProcess, path: str, body: dict[str, Any]) -> socket.socket:
    """A request sent whole on a connection of its own, whose answer is never read."""
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(data)}\r\n\r\n"
    sock = socket.create_connection((HOST, server.port))
    sock.sendall(head.encode() + data)
    return sock


def _metric(server: ServerProcess, sample: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{sample} not in metrics")


def _until(what: str, check: Callable[[dict[str, Any]], bool], server: ServerProcess, within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not check(status := httpx.get(f"{server.url}/readyz").json()):
        assert time.monotonic() < deadline, f"never {what}: {status}"
        time.sleep(0.05)


def _started_by(agents: list[int]) -> set[int]:
    return set().union(*(_descendants(a) for a in agents))


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            children.setdefault(int(stat[1]), []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _stat(pid: int) -> list[str] | None:
    """State and parent of a process, None when it is gone (a zombie has gone: nobody may have reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[:2]


def test_runs_of_a_client_that_went_away_are_cancelled(server: ServerProcess, backend: str) -> None:
    limits = {"timeout_s": 60}
    # Both workers run a request of each answer path (the whole-answer cache of /run_code, and the steps),
    # then a group of three runs (two batches: one per worker) waits in the queue behind them.
    running = [
        _open_request(server, "/run_code", {"language": "python", "code": SLEEPER, "run_timeout": 60}),
        _open_request(server, "/v1/execute", {"language": "python", "code": SLEEPER, "limits": limits}),
    ]
    _until("both workers busy", lambda s: s["busy"] == 2, server)
    tests = [{"stdin": str(i), "expected_stdout": ""} for i in range(3)]
    group = {"language": "python", "programs": [SLEEPER], "tests": tests, "limits": limits}
    queued = _open_request(server, "/v1/evaluate", group)
    _until("the group queued", lambda s: s["queued"] == 2, server)
    agents = server.agents()  # local agents; a container backend's agents are in its containers
    started_by_agents = _started_by(agents)  # their boxes, and the programs in the boxes

    for sock in [*running, queued]:
        sock.close()
    started = time.monotonic()
    answer = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(6 * 7)"}, timeout=60)
    waited = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["run"]["stdout"] == "42\n", answer.text
    # Behind the abandoned runs it would wait 60 s; a replaced worker starts in about a second.
    assert waited < 10, f"the next request waited {waited:.1f} s"

    assert _metric(server, "codegym_sandbox_abandoned_requests_total") == 3
    assert _metric(server, "codegym_sandbox_cancelled_runs_total") == 5  # 1 + 1 + 3 tests
    # Nothing of a cancelled run is cached: the one entry of each store is the answer just given.
    assert _metric(server, 'codegym_sandbox_cache_entries{store="steps"}') == 1
    assert _metric(server, 'codegym_sandbox_cache_entries{store="answers"}') == 0
    # The two agents that held the sleepers were killed and replaced: no slot leaked, none is broken.
    _until("the pool whole", lambda s: s["alive"] == 2 and s["busy"] == 0 and s["queued"] == 0, server)
    status = httpx.get(f"{server.url}/readyz").json()
    assert status["restarts"] == 2 and status["broken_slots"] == [], status
    if backend == "local":
        assert len(set(agents) - set(server.agents())) == 2
        deadline = time.monotonic() + 5  # a box dies with its agent, and everything in the box with the box
        while left := {p for p in started_by_agents if _stat(p) is not None} - _started_by(server.agents()):
            assert time.monotonic() < deadline, f"processes of the cancelled runs still there: {sorted(left)}"
            time.sleep(0.05)
    for i in range(4):  # and every slot serves right answers again
        again = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": f"print({i} * 2)"})
        assert again.json()["run"]["stdout"] == f"{i * 2}\n", again.text


# Prints LIMITS__OUTPUT_BYTES (8 MiB) exactly, its answer at the end: the verdict needs the whole output.
LOUD = "import sys\nn = sys.stdin.readline().strip()\nsys.stdout.write(' ' * ((8 << 20) - 16) + n + '\\n')\n"


def _vm_mb(pid: int, field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (its peak) of a process, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) >> 10 for line in f if line.startswith(f"{field}:"))


def test_what_programs_print_is_held_per_exchange_not_per_request(server: ServerProcess, backend: str) -> None:
    """A 4 KB request of 100 tests whose program prints the output limit on each (800 MiB in all): held whole,
    it took the server 800 MiB and each agent as much; held one exchange at a time (64 MiB of output, as this
    server is set), about 200 MiB each, and every verdict is still the whole output's. The server holds too the
    outputs waiting for their comparison in its pool of processes (off_loop.py), each charged to the memory
    budget: some 300 MiB on a loaded machine, where the pool falls behind."""
    if backend != "local":
        pytest.skip("the agents' memory is measured on the local backend (a container's agent is not a child)")
    warm = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(1)"}, timeout=60)
    assert warm.status_code == 200, warm.text
    agents = server.agents()
    before = _vm_mb(server.pid, "VmRSS"), {a: _vm_mb(a, "VmRSS") for a in agents}
    tests = [{"stdin": f"{i}\n", "expected_stdout": "wrong" if i == 7 else str(i)} for i in range(100)]
    body = {"language": "python", "programs": [LOUD], "tests": tests, "comparison": "whitespace", "cache": False}
    answer = httpx.post(f"{server.url}/v1/evaluate", json=body, timeout=600)
    assert answer.status_code == 200, answer.text
    (result,) = answer.json()["results"]
    assert [t["verdict"] for t in result["tests"]] == ["WA" if i == 7 else "AC" for i in range(100)]
    assert result["verdict"] == "WA" and result["passed"] == 99
    grew = _vm_mb(server.pid, "VmHWM") - before[0]
    assert grew < 400, f"the server grew by {grew} MiB for 800 MiB of output"
    assert server.agents() == agents  # the same agents served it: their peaks are this request's
    for agent, rss in before[1].items():
        assert (agent_grew := _vm_mb(agent, "VmHWM") - rss) < 300, f"an agent grew by {agent_grew} MiB"


def test_a_tests_stdin_is_held_once_for_every_program(server: ServerProcess) -> None:
    """A 4 MiB stdin for 64 programs: copied for each, it took the server 256 MiB at once."""
    warm = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(1)"}, timeout=60)
    assert warm.status_code == 200, warm.text
    before = _vm_mb(server.pid, "VmRSS")
    programs = [f"import sys\nprint(len(sys.stdin.read()))  # {i}\n" for i in range(64)]
    tests = [{"stdin": "y" * (4 << 20), "expected_stdout": str(4 << 20)}]
    body = {"language": "python", "programs": programs, "tests": tests, "cache": False}
    answer = httpx.post(f"{server.url}/v1/evaluate", json=body, timeout=600)
    assert answer.status_code == 200, answer.text
    assert [r["verdict"] for r in answer.json()["results"]] == ["AC"] * 64
    grew = _vm_mb(server.pid, "VmHWM") - before
    assert grew < 100, f"the server grew by {grew} MiB for a 4 MiB stdin"


# Prints half a million integers, each expected as ``1.0``: compared as numbers, some 0.5 s of the comparison pool
# for a run that costs its worker a few tens of milliseconds.
NUMBERS = 500_000


def _from(server: ServerProcess, address: str) -> httpx.Client:
    """A client of ``server`` whose connections come from ``address`` (a client of its own to the server)."""
    return httpx.Client(base_url=server.url, transport=httpx.HTTPTransport(local_address=address), timeout=120)


def _floats(program: str, expected: str) -> dict[str, Any]:
    tests = [{"stdin": "", "expected_stdout": expected}]
    return {"language": "python", "programs": [program], "tests": tests, "comparison": "float", "cache": False}


def test_a_clients_comparisons_take_turns_at_the_pool_with_other_clients(server: ServerProcess, backend: str) -> None:
    """One client's outputs waiting for the comparison pool were one queue with everyone's: a client's 2,000 numbers
    waited for every output another client had sent before them (8 s behind one request of 16 programs). They now
    wait in their client's turn, and a client's outputs wait in its run window: beside five requests of another
    client, each an output the pool takes half a second over, the victim's comparison waits for a slice of the one
    in the pool (``judging/slices.py``), not for the other client's backlog."""
    if backend != "local":
        pytest.skip("the pool's turns are the server's: measured once, on the local backend")
    victim = _floats("print(' '.join(['2.5'] * 2000))", " ".join(["2.50"] * 2000))
    with _from(server, "127.0.0.1") as attacker_client, _from(server, "127.0.0.2") as victim_client:
        warm = victim_client.post("/v1/evaluate", json=victim)  # the pool's process started, the victim's run warm
        assert warm.status_code == 200 and warm.json()["results"][0]["verdict"] == "AC", warm.text
        answered: list[tuple[float, str]] = []  # when each attacker's request was answered, and its verdict

        def attack(i: int) -> None:
            body = _floats(f"import sys\nsys.stdout.write('1 ' * {NUMBERS})  # {i}", "1.0 " * NUMBERS)
            answer = attacker_client.post("/v1/evaluate", json=body)
            ok = answer.status_code == 200
            answered.append((time.monotonic(), answer.json()["results"][0]["verdict"] if ok else answer.text))

        attackers = [threading.Thread(target=attack, args=(i,)) for i in range(5)]
        for thread in attackers:
            thread.start()
        try:
            deadline = time.monotonic() + 60
            while not answered:  # the first of them compared: the others' outputs wait for the pool now
                assert time.monotonic() < deadline, "no attacker's request was answered"
                time.sleep(0.01)
            sent = time.monotonic()
            answer = victim_client.post("/v1/evaluate", json=victim)
            done = time.monotonic()
        finally:
            for thread in attackers:
                thread.join()
    assert answer.status_code == 200 and answer.json()["results"][0]["verdict"] == "AC", answer.text
    assert [verdict for _, verdict in answered] == ["AC"] * 5
    # Of the four outputs left behind the first, those whose comparison ended while the victim's request was
    # served (its run too: one more where that was slow), never all of them.
    behind = sum(sent < t < done for t, _ in answered)
    assert behind <= 2, f"the victim's comparison waited for {behind} of another client's"
