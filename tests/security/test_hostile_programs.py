"""Every hostile program gets its safe outcome, and leaves nothing behind, on every backend.

After each attack a canary program (distinct source every time, so never a cached answer) must answer
correctly and report the same box as before the attacks: no process but itself and its supervisors, no
file in the scratch directory, ``/tmp`` or ``/dev/shm``, no System V IPC object, a clean environment,
interpreter and descriptor table, and the same limits, priority, CPUs and scheduling policy (which a
program forked from a changed box would inherit). The host is checked too (see ``host_state.py``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from .host_state import HostState
from .hostile_programs import ATTACKS, Attack
from .suite import PROGRAM_HOST_UID, SERVER_SECRET

_CANARY = """
import builtins, json, os, resource, sys
def ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return type(exc).__name__
try:
    with open("/proc/sysvipc/shm") as f:
        sysv = len(f.read().splitlines()) - 1
except OSError:
    sysv = -1
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps({
    "sum": sum(map(int, sys.stdin.read().split())),
    "extra_processes": [p for p in pids if p not in (1, os.getpid(), os.getppid())],
    "box": ls("."), "tmp": ls("/tmp"), "shm": ls("/dev/shm"), "sysv_shm": sysv, "cwd": os.getcwd(),
    "fds": ls("/proc/self/fd"), "env": sorted(os.environ), "leak_module": "codegym_leak" in sys.modules,
    "leak_builtin": hasattr(builtins, "codegym_leak"), "recursion": sys.getrecursionlimit(),
    "limits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "nice": os.getpriority(os.PRIO_PROCESS, 0), "cpus": sorted(os.sched_getaffinity(0)),
    "policy": os.sched_getscheduler(0),
}))
"""
_counter = itertools.count()


def canary(client: TestClient) -> dict[str, Any]:
    """Run the canary; its report without the parts that change from run to run."""
    n = next(_counter)
    body = {"language": "python", "code": f"{_CANARY}# canary {n}\n", "stdin": f"{n} 2 3"}
    r = client.post("/v1/execute", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["verdict"] == "AC", out
    report: dict[str, Any] = json.loads(out["run"]["stdout"])
    assert report.pop("sum") == n + 5, "the canary got a wrong answer"
    return report


@pytest.fixture(scope="module")
def baseline(hostile: TestClient, host: HostState) -> dict[str, Any]:
    report = canary(hostile)
    assert report["extra_processes"] == [] and report["box"] == ["main.py"], report
    return report


def _values(host: HostState) -> dict[str, str]:
    return {
        "SECRET_FILE": str(host.secret_file),
        "CANARY_FILE": str(host.canary_file),
        "CANARY_DIR": str(host.canary_dir),
        "UNIX_PATH": str(host.unix_path),
        "TCP_PORT": str(host.tcp_port),
        "EXPECTED": "codegym-expected-7f3a9c",
        "WRONG": "not-the-answer",
    }


def _verdict(route: str, out: dict[str, Any]) -> str:
    if route == "/v1/evaluate":
        verdict: str = out["results"][0]["verdict"]
    else:
        verdict = out["verdict"]
    return verdict


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{a.family}-{a.id}" for a in ATTACKS])
def test_hostile_program(
    attack: Attack, hostile: TestClient, host: HostState, baseline: dict[str, Any], backend: str
) -> None:
    route, body = attack.request(_values(host))
    r = hostile.post(route, json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    verdict = _verdict(route, out)
    assert verdict in attack.verdicts, f"{attack.id}: verdict {verdict}, expected one of {set(attack.verdicts)}: {out}"
    if attack.stdout is not None:
        assert out["run"]["stdout"] == attack.stdout, out
    if attack.fetched is not None:
        assert out["files"] == attack.fetched, out
    assert SERVER_SECRET not in r.text, f"{attack.id} read the server's secret"
    assert host.secret not in r.text
    if route == "/v1/evaluate":
        assert "codegym-expected-7f3a9c" not in json.dumps(out), f"{attack.id} found the expected output"

    _assert_nothing_left(attack, hostile, host, baseline, backend)


def _assert_nothing_left(
    attack: Attack, hostile: TestClient, host: HostState, baseline: dict[str, Any], backend: str
) -> None:
    """The box, the host and the pool are as they were before ``attack`` ran."""
    after = canary(hostile)
    assert after == baseline, f"{attack.id} left something behind: {after} != {baseline}"
    problems = host.problems()
    assert not problems, f"{attack.id} changed the host: {problems}"
    # Programs run as their own host uid: only the spare program process waiting for the next run (and,
    # in a container, the agent and the box) may have it now.
    leftover = host.program_processes()
    assert len(leftover) <= (1 if backend == "local" else 3), f"{attack.id} left processes of uid {PROGRAM_HOST_UID}"
    ready = hostile.get("/readyz").json()
    assert ready["alive"] == 1, ready


# Python programs that /v1/execute runs on their own, run here as two tests of one /v1/evaluate: each test
# is forked from the process that compiled the program (a test series), which must hold as well.
SERIES_ATTACKS = [a for a in ATTACKS if a.language == "python" and not a.tests and not a.files and not a.fetch]


@pytest.mark.parametrize("attack", SERIES_ATTACKS, ids=[f"{a.family}-{a.id}" for a in SERIES_ATTACKS])
def test_hostile_program_in_a_test_series(
    attack: Attack, hostile: TestClient, host: HostState, baseline: dict[str, Any], backend: str
) -> None:
    route, body = attack.request(_values(host))
    assert route == "/v1/execute"
    test = {"stdin": body["stdin"] or "", "expected_stdout": "codegym-expected-7f3a9c"}
    req = {"language": "python", "programs": [body["code"]], "tests": [test, test], "limits": body["limits"]}
    r = hostile.post("/v1/evaluate", json=req)
    assert r.status_code == 200, r.text
    out = r.json()
    # A run that ends well on its own (AC) prints something else than this expected output here (WA).
    allowed = {"WA" if v == "AC" else v for v in attack.verdicts}
    verdicts = [t["verdict"] for t in out["results"][0]["tests"]]
    assert set(verdicts) <= allowed, f"{attack.id}: verdicts {verdicts}, expected among {allowed}: {out}"
    assert SERVER_SECRET not in r.text, f"{attack.id} read the server's secret"
    assert host.secret not in r.text

    _assert_nothing_left(attack, hostile, host, baseline, backend)
