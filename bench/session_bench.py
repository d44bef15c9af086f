"""Sessions against the HTTP floor and against what a stateless sandbox forces: replaying every earlier cell.

    . .venv/bin/activate
    python bench/session_bench.py                 # every table; --idle 1000 for the idle-sessions row
    python bench/session_bench.py --idle 0        # without it

Each table is measured against a baseline in the same run, on the same server (ratios, not absolute times,
are what carries between machines):

1. **Round trips**: a trivial cell (``1``) in a session against a cached ``/v1/execute`` (the same request
   over and over: an answer from the cache, the HTTP floor), one keep-alive connection, sequentially, one of
   each in turn (so that the machine's swings weigh on both alike); and
   making a session, from a kernel started ahead (``SESSIONS__WARM``, the default) and without one, each against
   a floor call made just before it (the server kept at work while the next kernel starts: never idle, which on
   some hosts slows the next process start twentyfold); and
   forking a warm session into 16 (``POST /v1/sessions/{id}/fork``), against a trivial cell and against what the
   kernel alone charges for 16 clones of a process holding the same state (plain, and into the new user, mount
   and network namespaces each copy is given: the floor of any fork as isolated); the fork and a cell in
   each member after it (what a group's rollout does next), against making 16 sessions and replaying the
   session's cells in each (what a sandbox without forks forces).
2. **A 10-cell rollout**: the cells of a tool-using rollout (imports, data, a function, its tests, fixes)
   through one session, against the same rollout through stateless ``/v1/execute`` calls that each replay
   every earlier cell (what a sandbox without sessions forces on the client), uncached.
3. **Idle sessions** (``--idle N``): N sessions made and left idle, each with a small memory limit; the memory
   each holds (the proportional set size of every process of the server, with them less without them, per
   session), and the latency of an uncached trivial run without them, beside them, and without them again once
   they are deleted (how much two measurements without them differ: the noise).

The server is started here on loopback with the settings each table needs, and stopped in ``finally``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

HOST = "127.0.0.1"
ROLLOUT = [
    "import math, random, collections",
    "random.seed(7)\ndata = [random.randint(1, 100) for _ in range(2000)]",
    "def mean(xs):\n    return sum(xs) / len(xs)",
    "m = mean(data)\nround(m, 3)",
    "def var(xs):\n    mu = mean(xs)\n    return sum((x - mu) ** 2 for x in xs) / len(xs)",
    "round(math.sqrt(var(data)), 3)",
    "counts = collections.Counter(x % 10 for x in data)\ncounts.most_common(3)",
    "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    return (s[n // 2] + s[(n - 1) // 2]) / 2",
    "assert median([1, 2, 3]) == 2 and median([1, 2, 3, 4]) == 2.5\nmedian(data)",
    "print(len(data), round(m, 2), median(data))",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


BACKEND = "local"  # --backend


@contextmanager
def server(**env: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A codegym sandbox on loopback with ``CODEGYM_SANDBOX_<key>`` settings; its port and process."""
    port = free_port()
    # The tables time calls of one client back to back, hundreds of session starts a minute: on docker and podman
    # past the rate a client's starts are bounded by (SESSIONS__CLIENT_STARTS_PER_S), which is admission, not speed.
    env = {"SESSIONS__CLIENT_STARTS_PER_S": "1000", **env}
    environ = dict(os.environ, **{f"CODEGYM_SANDBOX_{k}": v for k, v in env.items()})
    cmd = [sys.executable, "-m", "codegym_sandbox.cli", "serve", "--host", HOST, "--port", str(port)]
    cmd += ["--backend", BACKEND, "--workers", "2", "--log-level", "warning"]
    log = open(f"/tmp/session_bench_{port}.log", "wb")  # noqa: SIM115 - the server's log, closed in finally
    proc = subprocess.Popen(cmd, env=environ, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the sandbox exited with {proc.returncode} before it was ready (see {log.name})")
            try:
                status, _ = Conn(port).call("GET", "/readyz")
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the sandbox did not become ready within 90 s")
            time.sleep(0.2)
        # A server starts kernels ahead once its first session is made (a container each on docker, some 350 ms):
        # the tables measure a running server, whose sessions find one (the first rollouts were made cold).
        if environ.get("CODEGYM_SANDBOX_SESSIONS__WARM", "1") != "0":
            first = Conn(port).ok("POST", "/v1/sessions", {}, 201)["session_id"]
            Conn(port).ok("DELETE", f"/v1/sessions/{first}", want=204)
            while _warm_kernels(port) < 1:
                if time.monotonic() > deadline:
                    raise SystemExit("the sandbox started no session kernel ahead within 90 s")
                time.sleep(0.1)
        yield port, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


def _warm_kernels(port: int) -> float:
    """The session kernels the server holds started ahead now (its ``/metrics`` gauge)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith("codegym_sandbox_sessions_warm "):
            return float(line.split()[1])
    return 0.0


class Conn:
    """One keep-alive connection: a call's status and JSON body."""

    def __init__(self, port: int) -> None:
        self.http = http.client.HTTPConnection(HOST, port, timeout=120)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        self.http.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = self.http.getresponse()
        raw = r.read()
        return r.status, json.loads(raw) if raw else None

    def ok(self, method: str, path: str, body: Any = None, want: int = 200) -> Any:
        status, answer = self.call(method, path, body)
        if status != want:
            raise SystemExit(f"{method} {path}: {status} {answer}")
        return answer


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def ms(xs: list[float], q: float = 0.5) -> str:
    return f"{statistics.quantiles(xs, n=100)[int(q * 100) - 1] * 1000:.2f}" if len(xs) > 1 else "-"


def cell(c: Conn, sid: str, code: str) -> dict[str, Any]:
    out: dict[str, Any] = c.ok("POST", f"/v1/sessions/{sid}/execute", {"code": code})
    if out["error"] is not None or not out["alive"]:
        raise SystemExit(f"cell failed: {code!r}: {out}")
    return out


def round_trips(n: int) -> None:
    with server() as (port, _):
        c = Conn(port)
        floor_body = {"language": "python", "code": "print(1)"}
        c.ok("POST", "/v1/execute", floor_body)
        sid = c.ok("POST", "/v1/sessions", {}, 201)["session_id"]
        cell(c, sid, "1")
        # The floor and the cell call by call, in turn: whatever else the machine does meanwhile (a shared host
        # swings both twofold over a minute) weighs on both alike, and their ratio is what it is at one moment.
        floor: list[float] = []
        cells: list[float] = []
        for _ in range(n):
            floor += timed(lambda: c.ok("POST", "/v1/execute", floor_body), 1)
            cells += timed(lambda: cell(c, sid, "1"), 1)
        c.ok("DELETE", f"/v1/sessions/{sid}", want=204)

        forks, grouped, replayed = [], [], []
        prefix = "import json, random\ndata = list(range(100_000))\nrandom.seed(1)"
        for i in range(min(n, 20)):
            # A warm session with some state (a 100k list, imports), forked into 16; then every member ended,
            # so that the next fork starts from the same server (a family holds its users until it ends).
            parent = c.ok("POST", "/v1/sessions", {"limits": {"memory_mb": 128}}, 201)["session_id"]
            cell(c, parent, prefix)
            t = time.perf_counter()
            copies = c.ok("POST", f"/v1/sessions/{parent}/fork", {"n": 16})["session_ids"]
            forks.append(time.perf_counter() - t)
            # What a group's rollout then does: a cell in every member (the members' agents start after the
            # fork's answer, so their start is counted here).
            if any(cell(c, copy, "len(data)")["display"] != "100000" for copy in copies):
                raise SystemExit("a copy does not hold its parent's state")
            grouped.append(time.perf_counter() - t)
            for made in (parent, *copies):
                c.ok("DELETE", f"/v1/sessions/{made}", want=204)
            if i < 3:  # without a fork: 16 sessions, each made and given the prefix again, then the same cell
                t = time.perf_counter()
                made = [c.ok("POST", "/v1/sessions", {"limits": {"memory_mb": 128}}, 201)["session_id"] for _ in copies]
                for sid in made:
                    cell(c, sid, prefix)
                    cell(c, sid, "len(data)")
                replayed.append(time.perf_counter() - t)
                for sid in made:
                    c.ok("DELETE", f"/v1/sessions/{sid}", want=204)

        # A kernel starts behind the one taken: it is waited for with the server kept at work (floor calls), not
        # asleep: on some hosts (a virtual machine's CPUs) a process starts twentyfold slower after a quarter of a
        # second idle than back to back, which would be timed as the session's. Each make is paired with a floor
        # call just before it, and their ratio reported.
        warm, warm_floor = [], []
        for _ in range(min(n, 60)):
            ready = time.monotonic() + 30
            while _warm_kernels(port) < 1 and time.monotonic() < ready:
                c.ok("POST", "/v1/execute", floor_body)
            warm_floor += timed(lambda: c.ok("POST", "/v1/execute", floor_body), 1)
            t0 = time.perf_counter()
            made = c.ok("POST", "/v1/sessions", {}, 201)["session_id"]
            warm.append(time.perf_counter() - t0)
            c.ok("DELETE", f"/v1/sessions/{made}", want=204)
    with server(SESSIONS__WARM="0") as (port, _):
        c = Conn(port)
        c.ok("POST", "/v1/execute", floor_body)
        cold, cold_floor = [], []
        for _ in range(min(n, 40)):
            cold_floor += timed(lambda: c.ok("POST", "/v1/execute", floor_body), 1)
            t0 = time.perf_counter()
            made = c.ok("POST", "/v1/sessions", {}, 201)["session_id"]
            cold.append(time.perf_counter() - t0)
            c.ok("DELETE", f"/v1/sessions/{made}", want=204)
    f, t = statistics.median(floor), statistics.median(cells)
    w, wf = statistics.median(warm), statistics.median(warm_floor)
    cd, cf = statistics.median(cold), statistics.median(cold_floor)
    print("\n### Round trips (one keep-alive connection, sequential)\n")
    print("| what | median ms | p90 ms | vs the floor |\n|---|---:|---:|---:|")
    print(f"| cached `/v1/execute` (the HTTP floor) | {ms(floor)} | {ms(floor, 0.9)} | 1.00x |")
    print(f"| a trivial cell in a session | {ms(cells)} | {ms(cells, 0.9)} | {t / f:.2f}x |")
    made_ahead, made_cold = "make a session (a kernel started ahead)", "make a session (SESSIONS__WARM=0)"
    print(f"| {made_ahead} | {ms(warm)} | {ms(warm, 0.9)} | {w / wf:.1f}x (its floor call {wf * 1e3:.2f} ms) |")
    print(f"| {made_cold} | {ms(cold)} | {ms(cold, 0.9)} | {cd / cf:.1f}x (its floor call {cf * 1e3:.2f} ms) |")
    k = statistics.median(forks)
    print(f"| fork a warm session into 16 | {ms(forks)} | {ms(forks, 0.9)} | {k / t:.1f}x a trivial cell |")
    if (floor_s := clone_floor(min(n, 20))) is not None:
        plain, isolated = floor_s
        print(f"| the kernel alone: 16 plain clones of a process holding the same state | {plain * 1000:.2f} | - | - |")
        print(
            f"| the kernel alone: 16 clones into new user, mount and network namespaces | {isolated * 1000:.2f} | - "
            f"| {isolated / t:.1f}x a trivial cell; the fork is {k / isolated:.1f}x this |"
        )
    g = statistics.median(grouped)
    then = "fork into 16, then a cell in each member"
    print(f"| {then} | {ms(grouped)} | {ms(grouped, 0.9)} | {g / t:.1f}x a trivial cell |")
    r = statistics.median(replayed)
    without = "no fork: 16 sessions made, the prefix replayed in each, then the cell"
    print(f"| {without} | {ms(replayed)} | {ms(replayed, 0.9)} | {r / g:.1f}x the fork and cells |")


# What the kernel alone charges for 16 copies of a process holding a session's state: 16 clones, each held
# until the last is made (as a fork's copies are), plain and into new user, mount and network namespaces (a
# fork's copies' own). Run in a process of its own, whose medians over ``trials`` it prints.
_CLONES = """
import ctypes, os, statistics, sys, time, json, random
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
data = list(range(100_000))
def sixteen(flags):
    r, w = os.pipe()
    t = time.perf_counter()
    for _ in range(16):
        pid = libc.syscall(56, flags | 17, 0, 0, 0, 0)  # clone(flags | SIGCHLD), as fork
        if pid == 0:
            os.read(r, 1)
            os._exit(0)
        if pid < 0:
            raise SystemExit(f"clone: {os.strerror(ctypes.get_errno())}")
    spent = time.perf_counter() - t
    os.write(w, bytes(16))
    for _ in range(16):
        os.wait()
    os.close(r); os.close(w)
    return spent
trials = int(sys.argv[1])
for flags in (0, 0x10000000 | 0x20000 | 0x40000000):
    print(statistics.median(sixteen(flags) for _ in range(trials)))
"""


def clone_floor(trials: int) -> tuple[float, float] | None:
    """The median seconds of 16 plain clones, and of 16 into new namespaces (None where they cannot be made)."""
    done = subprocess.run([sys.executable, "-c", _CLONES, str(trials)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        print(f"(no clone floor: {done.stderr.strip()[-200:]})", file=sys.stderr)
        return None
    plain, isolated = (float(x) for x in done.stdout.split())
    return plain, isolated


def rollout(rounds: int) -> None:
    with server() as (port, _):
        c = Conn(port)
        session_s, replay_s = [], []
        for r in range(rounds):
            t = time.perf_counter()
            sid = c.ok("POST", "/v1/sessions", {}, 201)["session_id"]
            outs = [cell(c, sid, code) for code in ROLLOUT]
            c.ok("DELETE", f"/v1/sessions/{sid}", want=204)
            session_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            for turn in range(len(ROLLOUT)):
                # Each turn sends every earlier cell again; a marker keeps each round's programs uncached.
                program = f"# round {r}\n" + "\n".join(ROLLOUT[: turn + 1])
                body = {"language": "python", "code": program, "cache": False}
                answer = c.ok("POST", "/v1/execute", body)
                if answer["verdict"] != "AC":
                    raise SystemExit(f"replay failed at turn {turn}: {answer}")
            replay_s.append(time.perf_counter() - t)
        if outs[-1]["stdout"] != answer["run"]["stdout"]:
            raise SystemExit(f"the two rollouts disagree: {outs[-1]['stdout']!r} vs {answer['run']['stdout']!r}")
    s, p = statistics.median(session_s), statistics.median(replay_s)
    print(f"\n### A {len(ROLLOUT)}-cell rollout, {rounds} rounds\n")
    print("| how | median s per rollout | vs the session |\n|---|---:|---:|")
    print(f"| one session: make, {len(ROLLOUT)} cells, delete | {s:.3f} | 1.00x |")
    print(f"| stateless `/v1/execute`, each turn replaying every earlier cell | {p:.3f} | {p / s:.2f}x |")


def _tree_pss_kb(root: int) -> tuple[int, int]:
    """The proportional set size of ``root`` and every process under it, and how many there are."""
    total = count = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
            count += 1
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack += [int(child) for child in f.read().split()]
        except (OSError, StopIteration):
            continue
    return total, count


def idle(n: int, memory_mb: int, runs: int) -> None:
    env = {
        "SESSIONS__MAX_SESSIONS": str(n + 8),
        "SESSIONS__MAX_SESSIONS_PER_CLIENT": str(n + 8),
        "SESSIONS__MEMORY_MB": str(memory_mb),
        "SESSIONS__PROCESSES": "8",
        "SESSIONS__WARM": "0",
        "SESSIONS__IDLE_TTL_S": "3600",
        "SESSIONS__MEMORY_SHARE": "1",  # idle sessions alone on the server: all of the budget is theirs
        # Each session's memory limit is taken from the budget whole: a budget that holds N of them (their limits,
        # not what they use: the table says what that is).
        "MEMORY_BUDGET_MB": str(n * memory_mb + 2048),
    }
    with server(**env) as (port, proc):
        c = Conn(port)

        def run_once(i: list[int] = [0]) -> None:  # noqa: B006 - a counter: every run distinct, uncached
            i[0] += 1
            c.ok("POST", "/v1/execute", {"language": "python", "code": f"print({i[0]})", "cache": False})

        timed(run_once, 20)
        without = timed(run_once, runs)
        before_kb, before_procs = _tree_pss_kb(proc.pid)
        made = []
        started = time.monotonic()
        for i in range(n):
            made.append(c.ok("POST", "/v1/sessions", {}, 201)["session_id"])
            if (i + 1) % 100 == 0:
                print(f"  {i + 1} sessions made ({time.monotonic() - started:.0f} s)", file=sys.stderr)
        for sid in made[:: max(n // 20, 1)]:
            cell(c, sid, "x = 1")  # some have run a cell, as in a rollout
        time.sleep(2)
        with_kb, with_procs = _tree_pss_kb(proc.pid)
        beside = timed(run_once, runs)
        for sid in made:
            c.ok("DELETE", f"/v1/sessions/{sid}", want=204)
        time.sleep(2)
        after = timed(run_once, runs)  # without them again: how far two measurements without them differ (noise)
    each_mb = (with_kb - before_kb) / n / 1024
    print(f"\n### {n} idle sessions (each SESSIONS__MEMORY_MB={memory_mb}, MEMORY_BUDGET_MB={n * memory_mb + 2048})\n")
    print("| what | value |\n|---|---:|")
    print(f"| memory each idle session holds (PSS, all its processes) | {each_mb:.1f} MiB |")
    print(f"| processes each | {(with_procs - before_procs) / n:.1f} |")
    print(f"| all {n} together | {(with_kb - before_kb) / 1024 / 1024:.2f} GiB |")
    w, b, a = statistics.median(without), statistics.median(beside), statistics.median(after)
    print(f"| uncached trivial run, median, without them | {w * 1000:.2f} ms |")
    print(f"| the same beside them | {b * 1000:.2f} ms ({b / w:.2f}x) |")
    print(f"| the same once they are deleted (the noise: without them twice) | {a * 1000:.2f} ms ({a / w:.2f}x) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="round trips per row of table 1")
    parser.add_argument("--rounds", type=int, default=5, help="rollouts of each kind in table 2")
    parser.add_argument("--idle", type=int, default=1000, help="idle sessions in table 3 (0: skip it)")
    parser.add_argument("--idle-memory-mb", type=int, default=48, help="each idle session's memory limit")
    parser.add_argument("--runs", type=int, default=100, help="runs timed without and beside the idle sessions")
    parser.add_argument(
        "--backend",
        choices=("local", "podman", "docker"),
        default="local",
        help="the server's backend (podman, docker: its runtime image built, `scripts/runtime-image podman|docker`)",
    )
    args = parser.parse_args()
    global BACKEND
    BACKEND = args.backend
    print(f"# session_bench: {os.cpu_count()} CPUs, {BACKEND} backend")
    round_trips(args.requests)
    rollout(args.rounds)
    if args.idle:
        idle(args.idle, args.idle_memory_mb, args.runs)


if __name__ == "__main__":
    main()
