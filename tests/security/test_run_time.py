"""A run's time is its own: the CPU time of all its processes counts, and only waits that other runs caused
stretch its wall-clock limit.

Each program here needs 1.4 times its CPU limit (1 s), spread so that no single process passes
``RLIMIT_CPU`` (some in processes that nobody waits for, which the kernel reaps), or stretches its wall time by
making itself wait; each must be TLE, alone and in a test series of tests. Honest programs of several processes
that stay within the limit are AC, and are charged all their processes' CPU time: no less than those processes
measured themselves.
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
def unwaited(n, each, threads=1, w=None):
    # Children nobody waits for: with SIGCHLD ignored the kernel reaps each as it exits, and its time is in no
    # process's count. Each writes what it used, by its own count, to a pipe; its end-of-file is their end.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    r = None
    if w is None:
        r, w = os.pipe()
    for _ in range(n):
        if os.fork() == 0:
            if r is not None:
                os.close(r)
            ts = [threading.Thread(target=spin, args=(each,)) for _ in range(threads - 1)]
            [t.start() for t in ts]
            spin(each)
            [t.join() for t in ts]
            os.write(w, f"{time.process_time()} ".encode())
            os._exit(0)
    os.close(w)
    return r
def gone(n, each):
    # A child that ignores SIGCHLD for its own children (the kernel reaps them), and waits for them to end:
    # its parent waits for it, and gets its time alone.
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        unwaited(n, each, w=w)
        try:
            os.wait()  # with SIGCHLD ignored: returns once every child has ended, reaped by the kernel
        except ChildProcessError:
            pass
        os._exit(0)
    os.close(w)
    return r
def used(r):
    # What the processes writing to r used, by their own count, once they have all ended.
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    return sum(map(float, data.split()))
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
    "unwaited children": "everywhere()\nused(unwaited(2, 0.7))\n",
    "unwaited children in turn": "for _ in range(4):\n    used(unwaited(1, 0.35))\n",
    "unwaited grandchildren": "everywhere()\nused(gone(2, 0.7))\n",
    "unwaited threads": "everywhere()\nused(unwaited(2, 0.7, threads=2))\n",
    # On one CPU: its unwaited children make it wait (their time is nobody's, so the wait seems another
    # run's doing) while it computes, and the wait stretches its wall time past its limit.
    "unwaited children beside it": "r = unwaited(2, 0.3)\nspin(0.8)\nused(r)\n",
    "threads in children": "everywhere()\nchildren(1, 0.2)\nts = [threading.Thread(target=children, args=(1, 0.6))"
    " for _ in range(2)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n",
}
# Each uses (about) 0.6 s of CPU in all.
HONEST = {
    "children": "children(2, 0.2)\nspin(0.2)\n",
    "children at once": "everywhere()\nchildren(3, 0.2)\n",
    "orphans": "orphans(2, 0.2)\nspin(0.2)\n",
    "unwaited children": "used(unwaited(2, 0.2))\nspin(0.2)\n",
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


# Each prints what its processes used by their own count (about 0.6 s), which the kernel counts too.
MEASURED = {
    "unwaited children": "spent = used(unwaited(2, 0.2))\nspin(0.2)\n",
    "unwaited grandchildren": "spent = used(gone(2, 0.2))\nspin(0.2)\n",
    "unwaited threads": "everywhere()\nspent = used(unwaited(1, 0.4, threads=2))\nspin(0.2)\n",
    "orphans and unwaited children": "orphans(1, 0.2)\nspent = 0.2 + used(unwaited(1, 0.2))\nspin(0.2)\n",
}


@pytest.mark.parametrize("how", sorted(MEASURED))
def test_a_run_is_charged_what_its_processes_used(hostile: TestClient, how: str) -> None:
    code = _SPIN + MEASURED[how] + "print(round(spent + time.process_time(), 3))\n"
    out = _execute(hostile, code, timeout_s=3)
    assert out["verdict"] == "AC", out
    spent = float(out["run"]["stdout"])
    assert spent >= 0.55, out
    # No less than the processes saw themselves use, but for the kernel's ticks (1/100 s of user and of system
    # time, per process, where a count sums /proc's); more by no more than what starting and ending them costs.
    assert spent - 0.06 <= out["run"]["cpu_s"] <= spent + 0.3, out
    tests = [{"stdin": "", "expected_stdout": ""}] * 2
    body = {"language": "python", "programs": [code], "tests": tests, "limits": {"timeout_s": 3}}
    r = hostile.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    for test in r.json()["results"][0]["tests"]:
        spent = float(test["stdout"])
        assert spent - 0.02 <= test["cpu_s"] <= spent + 0.3, test


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


# Assert tests that spend 0.15 s of CPU time in the checker themselves; where the program's add(0, 0) is 7 they leave
# a thread running, and their judge ends with that run.
_CHECKER_SPENDS = (
    "import threading, time\nt = time.process_time()\nwhile time.process_time() - t < 0.15:\n    pass\n"
    "if add(0, 0) == 7:\n    threading.Thread(target=time.sleep, args=(0.05,)).start()\nassert add(1, 2) == 3\n"
)


def test_a_run_is_charged_its_own_tests_time_never_earlier_runs(hostile: TestClient) -> None:
    """Each run of a set of tests is judged in a fork of their judge, which waits for it. Where the kernel counts a
    run's time, the judge's forks were counted only once the judge ended, all of them in the run it ended in: an
    honest program was TLE there (9 runs' 0.15 s in a 1 s limit)."""
    right = "def add(a, b):\n    return a + b\n"
    ending = "def add(a, b):\n    return 7 if a == b == 0 else a + b\n"
    body = {"language": "python", "programs": [right] * 8 + [ending], "tests": [{"assert_code": _CHECKER_SPENDS}]}
    r = hostile.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 1}})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [p["verdict"] for p in results] == ["AC"] * 9, results
    # Each charged its own tests' time (and its program's), where the kernel counts it or they report it: the 0.15 s
    # the tests spend by their own clock, give or take what the container's count less the supervisors' own leaves
    # (a few ms); never none, never earlier runs' too.
    assert all(0.1 <= p["tests"][0]["cpu_s"] < 0.6 for p in results), [p["tests"][0]["cpu_s"] for p in results]
