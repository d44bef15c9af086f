"""A run's time is its own: the CPU time of all its processes counts, and only waits that other runs caused
stretch its wall-clock limit.

Each program here needs 1.4 times its CPU limit (1 s), spread so that no single process passes
``RLIMIT_CPU``, or stretches its wall time by making itself wait; each must be TLE, alone and in a test series of
tests. Honest programs of several processes that stay within the limit are AC, and are charged all their
processes' CPU time.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

# Spins until the process (with what the processes before it carried over) has used ``need`` s of CPU.
_SPIN = """
import os, signal, sys, threading, time
def spin(need, carried=0.0):
    while carried + time.process_time() < need:
        pass
def everywhere():
    try:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    except OSError:
        pass
def children(n, each):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            spin(each)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
def orphans(n, each):
    # Children of children that end at once: they come to the box; this process waits for their end-of-file.
    r, w = os.pipe()
    for _ in range(n):
        if os.fork() == 0:
            if os.fork() == 0:
                os.close(r)
                spin(each)
            os._exit(0)
    os.close(w)
    os.read(r, 1)
"""
# Each needs 1.4 s of CPU in all, under a limit of 1 s.
GREEDY = {
    # The limit's warning (SIGXCPU) comes after 1 s: a fresh child goes on, its own count at zero.
    "fork on SIGXCPU": """
carried = 0.0
def go_on(sig, frame):
    global carried
    carried += time.process_time()
    pid = os.fork()
    if pid:
        os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
signal.signal(signal.SIGXCPU, go_on)
spin(1.4)
""",
    "ignore SIGXCPU": "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nspin(1.4)\n",
    "children at once": "everywhere()\nchildren(2, 0.7)\n",
    "children in turn": "for _ in range(4):\n    children(1, 0.35)\n",
    "orphans": "everywhere()\norphans(2, 0.7)\n",
    "threads in children": "everywhere()\nchildren(1, 0.2)\nts = [threading.Thread(target=children, args=(1, 0.6))"
    " for _ in range(2)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n",
}
# Each uses (about) 0.6 s of CPU in all.
HONEST = {
    "children": "children(2, 0.2)\nspin(0.2)\n",
    "children at once": "everywhere()\nchildren(3, 0.2)\n",
    "orphans": "orphans(2, 0.2)\nspin(0.2)\n",
}


def _execute(client: TestClient, code: str, **limits: Any) -> dict[str, Any]:
    body = {"language": "python", "code": code, "limits": {"timeout_s": 1, **limits}, "cache": False}
    r = client.post("/v1/execute", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _tests(client: TestClient, code: str, n: int, timeout_s: float = 1) -> list[str]:
    tests = [{"stdin": f"{i}", "expected_stdout": "done\n"} for i in range(n)]
    body = {"language": "python", "programs": [code], "tests": tests, "limits": {"timeout_s": timeout_s}}
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    return [t["verdict"] for t in r.json()["results"][0]["tests"]]


@pytest.mark.parametrize("how", sorted(GREEDY))
def test_a_run_gets_its_cpu_limit_however_many_processes_spend_it(hostile: TestClient, how: str) -> None:
    code = _SPIN + GREEDY[how] + "print('done')\n"
    out = _execute(hostile, code)
    assert out["verdict"] == "TLE", out
    assert _tests(hostile, code, 2) == ["TLE", "TLE"]


@pytest.mark.parametrize("how", sorted(HONEST))
def test_honest_processes_within_the_limit_are_charged_their_cpu(hostile: TestClient, how: str) -> None:
    code = _SPIN + HONEST[how] + "print('done')\n"
    out = _execute(hostile, code, timeout_s=3)
    assert out["verdict"] == "AC" and out["run"]["stdout"] == "done\n", out
    assert out["run"]["cpu_s"] >= 0.55, out  # every process's time, not the first process's alone
    assert _tests(hostile, code, 2, timeout_s=3) == ["AC", "AC"]


# Computes 0.6 s, then sleeps 0.7 s: 1.3 s of wall time under a limit of 1 s. Beside it, a busy child of its
# own at the lowest priority (on its CPU) waits while it computes; the child is stopped, not gone, when its
# wait is read. Made waits are no other run's doing, and stretch nothing.
_MADE_WAIT = """
import os, signal, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
def compute(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
"""
MADE_WAITS = {
    "nice 19 child": "pid = os.fork()\nif pid == 0:\n    os.nice(19)\n    while True:\n        pass\n"
    "compute(0.6)\nos.kill(pid, signal.SIGSTOP)\n",
    "children that take turns": "pids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
    "        os.nice(19)\n        while True:\n            pass\n    pids.append(pid)\ncompute(0.6)\n"
    "for pid in pids:\n    os.kill(pid, signal.SIGSTOP)\n",
}


@pytest.mark.parametrize("how", sorted(MADE_WAITS))
def test_waits_a_run_makes_itself_buy_no_time(hostile: TestClient, how: str) -> None:
    code = _MADE_WAIT + MADE_WAITS[how] + "time.sleep(0.7)\nprint('done')\n"
    out = _execute(hostile, code)
    assert out["verdict"] == "TLE", out
    assert _tests(hostile, code, 2) == ["TLE", "TLE"]
