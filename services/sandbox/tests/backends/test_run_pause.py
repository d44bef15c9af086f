"""A run the server pauses (for the memory budget or the CPUs: ``agent/run_pause.py``) stands still: every process
of it is stopped, its time limit moves on by the pause, its wall time leaves it out, and it is never run again.

A real server on the local backend; the test pauses a run's worker as the pool would."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for

# A child that computes all the time, beside a parent that sleeps: what the child computed once the parent woke.
BURNER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
time.sleep(1.0)
fields = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()
print(round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2))
child.kill()
"""


@pytest.fixture(scope="module")
def server() -> Iterator[TestClient]:
    with TestClient(create_app(settings_for("local", workers=1, max_workers=1, cache_entries=0))) as client:
        yield client


def _paused_for(
    server: TestClient, seconds: float, after_s: float, body: dict[str, Any], path: str, compiled: bool = False
) -> Any:
    """``body`` posted to ``path``; its worker paused ``after_s`` into its run (after its compile where
    ``compiled``), for ``seconds``."""
    backend = server.app.state.executor.backend  # type: ignore[attr-defined]
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(server.post(path, json=body).json()))
    thread.start()
    deadline = time.monotonic() + 30
    seen: list[object] = []
    while len(seen) < 1 + compiled:  # the run has its worker (the compile had one before it)
        assert time.monotonic() < deadline, "the run never took a worker"
        seen += [lease for lease in list(backend._leases) if lease not in seen]
        time.sleep(0.001)
    (worker,) = backend._leases.values()
    time.sleep(after_s)
    server.portal.call(worker.pause, True)  # type: ignore[union-attr]
    time.sleep(seconds)
    server.portal.call(worker.pause, False)  # type: ignore[union-attr]
    thread.join(30)
    return answer[0]


def test_a_paused_run_stands_still_and_is_no_time_out(server: TestClient) -> None:
    # Paused 2 s of a 1.5 s limit, 0.4 s into its second of sleep: not TLE, and its wall time leaves the pause
    # out. Its child, which computes all the time, computed nothing while it stood paused.
    restarts = server.get("/readyz").json()["restarts"]
    body = {"language": "python", "code": BURNER, "run_timeout": 1.5}
    result = _paused_for(server, 2.0, 0.4, body, "/run_code")
    run = result["run_result"]
    assert result["status"] == "Success", result
    assert float(run["stdout"]) < 0.75, run  # unpaused, the child computes for most of the parent's second
    assert run["execution_time"] < 1.5, run
    assert server.get("/readyz").json()["restarts"] == restarts  # the run was not run again


def test_a_pause_holds_across_the_tests_of_one_exchange(server: TestClient) -> None:
    # Three tests of one program in one exchange (a test series), each sleeping 0.5 s of a 1 s limit: paused for
    # 2.5 s, whichever test is on (or the next, where the pause comes between two), none is TLE.
    code = "import time\ntime.sleep(0.5)\nprint(input())"
    tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(3)]
    body = {"programs": [code], "tests": tests, "language": "python", "cache": False, "limits": {"timeout_s": 1}}
    for after_s in (0.1, 0.5, 0.9):
        sent = time.monotonic()
        answer = _paused_for(server, 2.5, after_s, body, "/v1/evaluate")
        assert [t["verdict"] for t in answer["results"][0]["tests"]] == ["AC"] * 3, answer
        # A sleep's time runs on while its process stands stopped: at most one test's sleep passes within the pause.
        assert time.monotonic() - sent > 2.5 + 1.0 - 0.2, "the exchange was never paused"


# A thread that computes beside a leader waiting in vfork for a child that sleeps: the pause's stop, sent to the
# process, goes to the leader, which cannot take it, and the thread computed (and grew) through the pause, credited
# (round 55). Each running thread now gets a stop of its own.
BESIDE_A_VFORK = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static volatile unsigned long spins;
static void *spin(void *arg) { for (;;) spins++; return arg; }
int main(void) {
    pthread_t thread;
    pthread_create(&thread, 0, spin, 0);
    if (syscall(SYS_vfork) == 0) {
        struct timespec nap = {1, 500000000};
        syscall(SYS_nanosleep, &nap, 0);
        syscall(SYS_exit, 0);
    }
    struct rusage used;
    getrusage(RUSAGE_SELF, &used);
    printf("%.2f\n", used.ru_utime.tv_sec + used.ru_utime.tv_usec / 1e6);
    return 0;
}
"""


def test_a_thread_beside_a_leader_waiting_in_vfork_stands_still_while_paused(server: TestClient) -> None:
    body = {"language": "c", "code": BESIDE_A_VFORK, "limits": {"timeout_s": 4}}
    result = _paused_for(server, 2.0, 0.6, body, "/v1/execute", compiled=True)
    assert result["verdict"] == "AC", result
    # Unpaused, the thread computes for the child's 1.5 s; through the pause it computed 3.5 s.
    assert float(result["run"]["stdout"]) < 2.2, result
