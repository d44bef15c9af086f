"""Load test of the sandbox: a real server driven at and above its capacity with fast, slow and hostile programs.

    . .venv/bin/activate
    python bench/load_bench.py --duration 120              # --workers 2 --queue-size 8; --help
    python bench/load_bench.py --duration 30 --kill-every 2  # and kill a random worker every 2 s

Two phases of equal length, each against the same server (``codegym-sandbox serve`` on 127.0.0.1, a free
port, cache off so every request really runs):

1. *at capacity*: as many concurrent clients as workers (the baseline);
2. *overload*: ``--overload`` times more clients than the server has workers plus queue slots, so that it
   must push back.

Every request carries a unique id that its program prints first, and the answer must carry that id back:
an answer lost, answered twice or crossed with another request's fails the run. The mix (seeded): fast
programs, slow ones (sleep), and hostile ones (busy loop, endless output, allocation bomb, fork bomb) each
with its expected verdict, plus ``/v1/evaluate`` groups. The only errors allowed are explicit backpressure:
429 or 503 (504 on ``/run_code``, the status SandboxFusion's clients retry) *with* ``Retry-After``; the
client then waits and sends the same request again. With
``--kill-every`` the script kills a random worker agent now and then: each kill may turn at most one run
into a sandbox error, everything else must still be right, and the pool must be whole again at the end
without a restart.

The server's resident memory and open descriptors are sampled every second and must stay flat (the last
sample against the one after warm-up). Prints a markdown table of latency percentiles per phase and kind,
then each check as PASS or FAIL; exits 1 when a check fails. Bounded: the duration, a timeout per request,
retries that stop a minute after their phase (the request then counted wrong), a server that binds
127.0.0.1 only and is stopped in ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
CLI = Path(sys.executable).parent / "codegym-sandbox"
GIVE_UP_AFTER_S = 60.0  # how long past its phase a refused request is sent again


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``codegym-sandbox serve`` on 127.0.0.1 in its own session, its log in a file, stopped by :meth:`stop`."""

    def __init__(self, env: dict[str, str] | None = None, args: list[str] | None = None, port: int = 0) -> None:
        self.port = port or free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix="codegym-server-", suffix=".log")[1])
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CODEGYM_SANDBOX_")}
        self.env.update(env or {})
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout: float = 60.0) -> ServerProcess:
        argv = [str(CLI), "serve", "--host", HOST, "--port", str(self.port), *self.args]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server was not ready in {ready_timeout} s: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def rss_kb(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def agents(self) -> list[int]:
        """Pids of the worker agents (the local backend's children running ``codegym_sandbox.agent``)."""
        return agents_of(self.pid)


def agents_of(pid: int) -> list[int]:
    """Pids of the local backend's worker agents started by process ``pid`` (a server, or an in-process app):
    its children running ``codegym_sandbox.agent``, or the children of its agent zygote."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if b"codegym_sandbox.agent" in cmdline:
            children.setdefault(ppid, []).append((int(name), cmdline))
    found = []
    for child, cmdline in children.get(pid, []):
        if b"codegym_sandbox.agent.worker_zygote" in cmdline:
            found += [agent for agent, _ in children.get(child, [])]
        else:
            found.append(child)
    return found


def running(pid: int) -> bool:
    """Whether process ``pid`` is alive: it exists and is not a zombie (one that nobody has reaped yet is dead,
    and stays in ``/proc`` for as long as its new parent takes, forever under an init that never reaps)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` is running (a process killed with its parent may take a moment to tear its
    namespaces down); those still running at ``timeout``."""
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if running(p)]


@dataclass(frozen=True)
class Kind:
    """One kind of program in the mix: its source (``{id}`` is the request id), weight and expected verdict."""

    name: str
    code: str
    weight: int
    verdicts: frozenset[str]
    timeout_s: float = 1.0


KINDS = [
    # Generous limits for the programs that must pass: on a loaded machine a short one would turn into TLE.
    Kind("fast", "print('{id}')\nprint(sum(range(1000)))\n", 60, frozenset({"AC"}), 5.0),
    Kind("slow", "import time\nprint('{id}', flush=True)\ntime.sleep(0.3)\n", 12, frozenset({"AC"}), 5.0),
    Kind("busy-loop", "print('{id}', flush=True)\nwhile True:\n    pass\n", 5, frozenset({"TLE"}), 0.5),
    Kind("endless-output", "print('{id}', flush=True)\nwhile True:\n    print('y' * 1000)\n", 5, frozenset({"OLE"})),
    Kind("allocation-bomb", "print('{id}', flush=True)\nx = bytearray(1 << 40)\n", 5, frozenset({"MLE"})),
    Kind(
        "fork-bomb",
        "import os\nprint('{id}', flush=True)\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
        "        break\n",
        3,
        frozenset({"AC", "TLE", "RE"}),  # however far it gets, it is over when the run is
        0.5,
    ),
    Kind("evaluate-group", "", 10, frozenset({"AC"})),
]
_EVAL_PROGRAMS = [
    "import sys\nprint('{id}', file=sys.stderr)\nprint(sum(map(int, input().split())))\n",
    "import sys\nprint('{id}', file=sys.stderr)\nprint(0)\n",
]


@dataclass
class Outcome:
    phase: str
    kind: str
    latency_s: float
    attempts: int
    verdict: str
    problem: str | None = None
    http_error: bool = False  # the problem is an HTTP answer other than a verdict, or no answer


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    rejected: Counter[int] = field(default_factory=Counter)
    issued: int = 0
    ids_answered: Counter[str] = field(default_factory=Counter)


def _request(kind: Kind, rid: str, limit_mb: int) -> tuple[str, dict[str, Any]]:
    if kind.name == "evaluate-group":
        programs = [p.replace("{id}", rid) + f"# {i}\n" for i, p in enumerate(_EVAL_PROGRAMS)]
        tests = [{"stdin": f"{i} {i + 1}", "expected_stdout": str(2 * i + 1)} for i in range(3)]
        return "/v1/evaluate", {"language": "python", "programs": programs, "tests": tests, "limits": {"timeout_s": 5}}
    body = {
        "language": "python",
        "code": kind.code.replace("{id}", rid),
        "limits": {"timeout_s": kind.timeout_s, "memory_mb": limit_mb},
    }
    return "/v1/execute", body


def _judge(kind: Kind, rid: str, answer: dict[str, Any], faults: bool) -> tuple[str, str | None]:
    """The verdict, and what is wrong with the answer (None when it is right)."""
    if kind.name == "evaluate-group":
        results = answer["results"]
        tests = [t for r in results for t in r["tests"]]
        if any(rid not in t["stderr"] for t in tests if t["verdict"] != "SE"):
            return "AC", "an evaluate answer carries another request's id"
        if faults and any(t["verdict"] == "SE" for t in tests):
            return "SE", None  # a killed worker's run; the other tests' answers were checked above
        verdicts = [r["verdict"] for r in results]
        if verdicts != ["AC", "WA"]:
            return "/".join(verdicts), f"evaluate verdicts {verdicts}, expected ['AC', 'WA']"
        return "AC", None
    verdict = answer["verdict"]
    if verdict == "SE" and faults:
        return verdict, None
    if verdict not in kind.verdicts:
        return verdict, f"verdict {verdict}, expected {sorted(kind.verdicts)}: {str(answer)[:300]}"
    if not answer["run"]["stdout"].startswith(rid + "\n"):
        return verdict, f"the answer does not carry its request's id {rid}: {answer['run']['stdout'][:80]!r}"
    return verdict, None


async def _client(
    http: httpx.AsyncClient, phase: str, end: float, rng: random.Random, tally: Tally, faults: bool
) -> None:
    weights = [k.weight for k in KINDS]
    while time.monotonic() < end:
        kind = rng.choices(KINDS, weights)[0]
        rid = f"req-{uuid.uuid4().hex[:12]}"
        route, body = _request(kind, rid, 128)
        tally.issued += 1
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                r = await http.post(route, json=body)
            except httpx.HTTPError as exc:
                tally.outcomes.append(Outcome(phase, kind.name, 0, attempts, "-", f"transport error: {exc!r}", True))
                break
            if r.status_code in (429, 503, 504):
                tally.rejected[r.status_code] += 1
                if "retry-after" not in r.headers:
                    tally.outcomes.append(
                        Outcome(phase, kind.name, 0, attempts, "-", f"{r.status_code} lacks Retry-After", True)
                    )
                    break
                if time.monotonic() > end + GIVE_UP_AFTER_S:
                    # A server that pushes back for ever is a failure to report, not a wait without end.
                    gave_up = f"still {r.status_code} {GIVE_UP_AFTER_S:.0f} s after the phase ended"
                    tally.outcomes.append(Outcome(phase, kind.name, 0, attempts, "-", gave_up, True))
                    break
                # Honour the server's pushback, scaled down so a short run still sees many retries.
                await asyncio.sleep(min(float(r.headers["retry-after"]), 1.0) * 0.2 * rng.uniform(0.5, 1.5))
                continue
            if r.status_code != 200:
                tally.outcomes.append(
                    Outcome(phase, kind.name, 0, attempts, "-", f"HTTP {r.status_code}: {r.text[:200]}", True)
                )
                break
            verdict, problem = _judge(kind, rid, r.json(), faults)
            tally.ids_answered[rid] += 1
            tally.outcomes.append(Outcome(phase, kind.name, time.monotonic() - started, attempts, verdict, problem))
            break


class Sampler(threading.Thread):
    """Samples the server's resident memory and open descriptors once a second."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.samples: list[tuple[float, int, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            try:
                self.samples.append((time.monotonic(), self.server.rss_kb(), self.server.open_fds()))
            except OSError:
                pass


class Killer(threading.Thread):
    """Kills a random worker agent every ``every`` seconds (fault injection)."""

    def __init__(self, server: ServerProcess, every: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.every, self.rng = server, every, random.Random(seed)
        self.kills = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every * self.rng.uniform(0.5, 1.5)):
            agents = self.server.agents()
            if agents:
                try:
                    os.kill(self.rng.choice(agents), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    pass


async def _phase(url: str, name: str, clients: int, seconds: float, seed: int, tally: Tally, faults: bool) -> float:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        started = time.monotonic()
        end = started + seconds
        await asyncio.gather(
            *(_client(http, name, end, random.Random(seed + i), tally, faults) for i in range(clients))
        )
        return time.monotonic() - started


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _table(tally: Tally, elapsed: dict[str, float], clients: dict[str, int]) -> list[str]:
    rows = [
        "| phase | kind | clients | answered | req/s | p50 ms | p90 ms | p99 ms | max ms | retries | SE | wrong |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in tally.outcomes:
        groups[(o.phase, "all")].append(o)
        groups[(o.phase, o.kind)].append(o)
    for phase in elapsed:
        for kind in ["all", *[k.name for k in KINDS]]:
            group = groups.get((phase, kind), [])
            if not group:
                continue
            ms = [o.latency_s * 1000 for o in group if o.problem is None]
            rate = f"{len(group) / elapsed[phase]:.1f}" if kind == "all" else ""
            rows.append(
                f"| {phase} | {kind} | {clients[phase]} | {len(group)} | {rate} | {_pct(ms, 0.5):.0f} | "
                f"{_pct(ms, 0.9):.0f} | {_pct(ms, 0.99):.0f} | {max(ms, default=float('nan')):.0f} | "
                f"{sum(o.attempts - 1 for o in group)} | {sum(o.verdict == 'SE' for o in group)} | "
                f"{sum(o.problem is not None for o in group)} |"
            )
    return rows


def run(args: argparse.Namespace) -> int:
    env = {
        "CODEGYM_SANDBOX_BACKEND": args.backend,
        "CODEGYM_SANDBOX_WORKERS": str(args.workers),
        "CODEGYM_SANDBOX_QUEUE_SIZE": str(args.queue_size),
        "CODEGYM_SANDBOX_CACHE_ENTRIES": "0",
        "CODEGYM_SANDBOX_MAX_CLIENT_REQUESTS": str(args.max_client_requests),
        "CODEGYM_SANDBOX_LIMITS__OUTPUT_BYTES": str(1 << 20),
    }
    server = ServerProcess(env, ["--log-level", "warning"])
    capacity = args.workers + args.queue_size
    clients = {"at capacity": args.workers, "overload": max(args.workers + 1, int(capacity * args.overload))}
    tally = Tally()
    elapsed: dict[str, float] = {}
    faults = args.kill_every > 0
    checks: list[tuple[str, bool, str]] = []
    try:
        server.start()
        sampler = Sampler(server)
        sampler.start()
        killer = Killer(server, args.kill_every, args.seed) if faults else None
        if killer is not None:
            killer.start()
        for i, (phase, n) in enumerate(clients.items()):
            print(f"load: {phase}: {n} clients for {args.duration / 2:.0f} s", file=sys.stderr)
            elapsed[phase] = asyncio.run(
                _phase(server.url, phase, n, args.duration / 2, args.seed + 1000 * i, tally, faults)
            )
        if killer is not None:
            killer.stopped.set()
            killer.join()
        sampler.stopped.set()
        sampler.join()
        deadline = time.monotonic() + 20
        ready: dict[str, Any] = {}
        while time.monotonic() < deadline:
            ready = httpx.get(f"{server.url}/readyz", timeout=5).json()
            if ready.get("alive") == args.workers:
                break
            time.sleep(0.2)
        server_alive = server.proc is not None and server.proc.poll() is None
        with contextlib.suppress(OSError):  # after the load: what the server holds when idle again
            sampler.samples.append((time.monotonic(), server.rss_kb(), server.open_fds()))
    finally:
        server.stop()
    answered = len(tally.outcomes)
    problems = [o.problem for o in tally.outcomes if o.problem]
    twice = [rid for rid, n in tally.ids_answered.items() if n > 1]
    ses = sum(o.verdict == "SE" for o in tally.outcomes)
    checks.append(
        (
            "every request answered exactly once",
            answered == tally.issued and not twice,
            f"{tally.issued} issued, {answered} answered, {len(twice)} answered twice",
        )
    )
    checks.append(
        (
            "every answer right (verdict and its own id)",
            not problems,
            f"{len(problems)} wrong" + (f"; first: {problems[0]}" if problems else ""),
        )
    )
    rejected = ", ".join(f"{n} x {code}" for code, n in sorted(tally.rejected.items())) or "none"
    http_errors = [o.problem for o in tally.outcomes if o.http_error]
    checks.append(
        (
            "errors only 429/503/504 with Retry-After",
            not http_errors,
            f"pushback: {rejected}; other errors: {len(http_errors)}",
        )
    )
    if faults:
        kills = killer.kills if killer is not None else 0
        checks.append(("sandbox errors only from killed workers", ses <= kills, f"{ses} SE, {kills} workers killed"))
    else:
        checks.append(("no sandbox errors", ses == 0, f"{ses} SE"))
    # Workers lent while programs slept stay a while after the load (they go after idle minutes); the
    # pool's own slots must all be there.
    lent_now = int(ready.get("lent_now") or 0)
    own = (ready.get("alive") or 0) - lent_now
    checks.append(
        (
            "pool whole again without a restart",
            server_alive and own == args.workers,
            f"readyz: alive {own}/{args.workers} (and {lent_now} lent), restarts {ready.get('restarts')}",
        )
    )
    samples = sampler.samples
    if len(samples) >= 4:
        warm = samples[max(1, len(samples) // 10)]
        last = samples[-1]
        peak_rss = max(s[1] for s in samples)
        rss_ok = last[1] <= warm[1] * 1.25 + 20_000
        # A lent worker, parked or not, holds its two pipes and a pidfd.
        fds_ok = last[2] <= warm[2] + 16 + 3 * (lent_now + int(ready.get("parked") or 0))
        checks.append(
            (
                "server memory flat",
                rss_ok,
                f"RSS {warm[1] / 1024:.0f} MiB after warm-up, "
                f"{last[1] / 1024:.0f} MiB when idle again (peak {peak_rss / 1024:.0f})",
            )
        )
        checks.append(("server descriptors flat", fds_ok, f"{warm[2]} open after warm-up, {last[2]} when idle again"))
    print(
        f"\nLoad: {args.backend} backend, {args.workers} workers, queue {args.queue_size}, at most "
        f"{args.max_client_requests} requests in flight per client, {args.duration:.0f} s"
        + (f", a worker killed every ~{args.kill_every} s" if faults else "")
        + "\n"
    )
    print("\n".join(_table(tally, elapsed, clients)))
    print()
    for name, ok, detail in checks:
        print(f"- {'PASS' if ok else 'FAIL'} {name}: {detail}")
    lat = [o.latency_s for o in tally.outcomes if o.kind == "fast" and o.problem is None]
    if lat:
        print(f"- fast programs: median {statistics.median(lat) * 1000:.1f} ms over both phases")
    return 0 if all(ok for _, ok, _ in checks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Only 127.0.0.1 is ever contacted.")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load in all (two equal phases)")
    parser.add_argument("--workers", type=int, default=2, help="server workers (concurrent runs)")
    parser.add_argument("--queue-size", type=int, default=8, help="runs that may wait before the server answers 503")
    parser.add_argument("--max-client-requests", type=int, default=16, help="requests in flight per client before 429")
    parser.add_argument("--overload", type=float, default=2.0, help="overload clients, per worker-or-queue slot")
    parser.add_argument("--backend", default="local", choices=["local", "docker", "podman"])
    parser.add_argument("--kill-every", type=float, default=0.0, help="kill a random worker about every S seconds")
    parser.add_argument("--seed", type=int, default=7)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
