"""verl's and SkyRL's request patterns against a real codegym sandbox, at its default settings.

    . .venv/bin/activate
    python bench/rl_clients.py                 # --cases 100 --timeout 10; --help

Both RL stacks call SandboxFusion's ``POST /run_code`` once per test case, many cases at once, with client
timeouts that include any time a request waits in the server's queue:

- **verl** (``verl.utils.reward_score.sandbox_fusion``): a thread pool of max(32, 5 x CPUs) threads per
  sample; each request's HTTP timeout is compile + run + 10 s; a 504 is retried (three attempts in all,
  1 s then 2 s apart), any other error or timeout scores -1. Scores: True/False for an answer, -2 a runtime
  error, -3 a time-out (TimeLimitExceeded), -4 a compile error.
- **SkyRL**: every case at once; each request's timeout is run + 2 s; nothing is retried (an error scores
  as a failure of the sandbox, not of the program).

The clients here are written from those rules (they import neither stack). Scenarios, each with
``--cases`` cases and ``--timeout`` seconds as the run (and compile) limit:

1. ``verl, sleepers``: programs that sleep past the limit: every case must score -3 (a time-out), none -1.
2. ``verl, I/O-bound``: programs that sleep a fifth of the limit, then echo their input: every case True.
3. ``SkyRL, I/O-bound``: the same programs, all cases at once: every answer right within run + 2 s.
4. ``SkyRL, sleepers``: programs that sleep past the limit, all at once: every case TimeLimitExceeded
   within run + 2 s.

Each scenario runs against two servers started here on 127.0.0.1, in turn: one with ``MAX_WORKERS`` equal
to its workers (every run holds a worker until it ends, as a fixed pool does) as the baseline, and one at
default settings (slots are lent while the CPUs idle, and runs are admitted by the memory they hold, not by
their 1 GiB default limit: see the sandbox's README). The table has one row per scenario and server: the
wall time, the slowest request, and the scores. The target: every scenario right on the default server
(exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_bench import ServerProcess

Score = Any  # True / False / -1 / -2 / -3 / -4, as verl scores a case


@dataclass
class Case:
    code: str
    stdin: str
    expected: str


def _post(client: httpx.Client, url: str, case: Case, timeout_s: float, request_timeout_s: float) -> httpx.Response:
    payload = {
        "code": case.code,
        "stdin": case.stdin,
        "language": "python",
        "compile_timeout": timeout_s,
        "run_timeout": timeout_s,
        "files": {},
        "fetch_files": [],
    }
    return client.post(f"{url}/run_code", json=payload, timeout=request_timeout_s)


def verl_case(client: httpx.Client, url: str, case: Case, timeout_s: float) -> Score:
    """One case as verl scores it: compile + run + 10 s per attempt, 504 retried twice (1 s, then 2 s)."""
    for attempt in range(3):
        try:
            r = _post(client, url, case, timeout_s, 2 * timeout_s + 10)
        except httpx.HTTPError:
            return -1
        if r.status_code == 504:
            if attempt < 2:
                time.sleep(attempt + 1)
            continue
        if r.status_code != 200:
            return -1
        body = r.json()
        run = body.get("run_result") or {}
        compiled = body.get("compile_result") or {}
        if body.get("status") == "Success" and run.get("status") == "Finished":
            return str(run.get("stdout") or "").rstrip("\n") == case.expected.rstrip("\n")
        if body.get("status") == "Failed":
            if compiled and (compiled.get("status") != "Finished" or compiled.get("return_code") != 0):
                return -4
            if run.get("status") == "TimeLimitExceeded":
                return -3
            if run:
                return -2
        return -1
    return -1


def skyrl_case(client: httpx.Client, url: str, case: Case, timeout_s: float) -> Score:
    """One case as SkyRL sends it: run + 2 s, no retry; -3 for a time-out, -1 when the request failed."""
    try:
        r = _post(client, url, case, timeout_s, timeout_s + 2)
    except httpx.HTTPError:
        return -1
    if r.status_code != 200:
        return -1
    body = r.json()
    run = body.get("run_result") or {}
    if run.get("status") == "TimeLimitExceeded":
        return -3
    if body.get("status") == "Success":
        return str(run.get("stdout") or "").rstrip("\n") == case.expected.rstrip("\n")
    return -2


@dataclass
class Outcome:
    scores: list[Score]
    wall_s: float
    slowest_s: float


def run_cases(
    one: Callable[[httpx.Client, str, Case, float], Score], url: str, cases: list[Case], timeout_s: float, threads: int
) -> Outcome:
    """Every case through ``one`` from ``threads`` threads (each with its own connection pool)."""
    slowest = 0.0
    # One TLS context for all: httpx builds one per client otherwise (about 30 ms of CPU, most of it holding
    # the GIL), and a hundred of them at once would take seconds of this machine's CPUs from the server under
    # test, which the RL clients, on machines of their own, do not.
    tls = ssl.create_default_context()

    def timed(case: Case) -> Score:
        nonlocal slowest
        with httpx.Client(verify=tls) as client:
            started = time.monotonic()
            score = one(client, url, case, timeout_s)
            slowest = max(slowest, time.monotonic() - started)
            return score

    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        scores = list(pool.map(timed, cases))
    return Outcome(scores, time.monotonic() - started, slowest)


def sleepers(n: int, timeout_s: float) -> list[Case]:
    return [Case(f"import time\ntime.sleep({3 * timeout_s})\nprint({i})", "", str(i)) for i in range(n)]


def io_bound(n: int, timeout_s: float) -> list[Case]:
    code = f"import time\ntime.sleep({timeout_s / 5})\nprint(input())"
    return [Case(code, f"case {i}", f"case {i}") for i in range(n)]


@dataclass
class Scenario:
    name: str
    client: Callable[[httpx.Client, str, Case, float], Score]
    cases: Callable[[int, float], list[Case]]
    expect: Score
    all_at_once: bool


SCENARIOS = [
    Scenario("verl, sleepers", verl_case, sleepers, -3, False),
    Scenario("verl, I/O-bound", verl_case, io_bound, True, False),
    Scenario("SkyRL, I/O-bound", skyrl_case, io_bound, True, True),
    Scenario("SkyRL, sleepers", skyrl_case, sleepers, -3, True),
]


def run_scenario(scenario: Scenario, url: str, cases: int, timeout_s: float) -> Outcome:
    threads = cases if scenario.all_at_once else max(32, 5 * (os.cpu_count() or 1))
    return run_cases(scenario.client, url, scenario.cases(cases, timeout_s), timeout_s, threads)


@contextmanager
def server(env: dict[str, str]) -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"CODEGYM_SANDBOX_BACKEND": "local", **env}).start()
    try:
        yield proc
    finally:
        proc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=100, help="test cases per scenario (default 100)")
    parser.add_argument("--timeout", type=float, default=10.0, help="run and compile limit in seconds (default 10)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the fixed-pool server")
    parser.add_argument(
        "--scenarios",
        default="1,2,3,4",
        help="which scenarios, in this order (default 1,2,3,4; each server starts cold)",
    )
    args = parser.parse_args(argv)
    workers = os.cpu_count() or 1
    servers = (
        []
        if args.no_baseline
        else [("fixed pool (MAX_WORKERS=workers)", {"CODEGYM_SANDBOX_MAX_WORKERS": str(workers)})]
    )
    servers.append(("default settings", {}))
    rows = []
    ok = True
    for label, env in servers:
        with server(env) as srv:
            for scenario in [SCENARIOS[int(i) - 1] for i in args.scenarios.split(",")]:
                print(f"[rl_clients] {label}: {scenario.name} ...", file=sys.stderr, flush=True)
                out = run_scenario(scenario, srv.url, args.cases, args.timeout)
                right = sum(1 for s in out.scores if s == scenario.expect and type(s) is type(scenario.expect))
                passed = right == len(out.scores)
                if label == "default settings":
                    ok &= passed
                counts = ", ".join(f"{k}: {v}" for k, v in sorted(Counter(map(str, out.scores)).items()))
                rows.append((scenario.name, label, out.wall_s, out.slowest_s, counts, "PASS" if passed else "MISS"))
    print(f"\n{args.cases} cases per scenario, run limit {args.timeout:g} s, {workers} workers (CPUs)\n")
    print("| scenario | server | wall s | slowest request s | scores | all right |")
    print("|---|---|---|---|---|---|")
    for name, label, wall, slowest, counts, verdict in rows:
        print(f"| {name} | {label} | {wall:.1f} | {slowest:.1f} | {counts} | {verdict} |")
    print(f"\ntarget: every scenario right on the default server: {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
