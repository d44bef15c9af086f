"""Trivial Python runs through the codegym sandbox vs a fresh interpreter (and docker) per run.

    . .venv/bin/activate
    python bench/sandbox_bench.py --requests 300 --concurrency 8

Rows of the markdown table it prints (every mode is warmed up with 20 requests first):

1. `python -I` per run: `subprocess.run([python, "-I", "-c", "print(i)"])`, sequentially (median, p99) and
   from a thread pool of C (req/s), where ``python`` is the interpreter the local backend runs programs on
   (``CODEGYM_SANDBOX_PYTHON``, or its default): both sides run the same build, whose start-up cost differs
   between builds (a distribution's, with libpython linked in, starts quicker than pyenv's shared one).
2. codegym `/run_code`, cache disabled (its own server with CODEGYM_SANDBOX_CACHE_ENTRIES=0, distinct code per
   request): one keep-alive http.client connection sequentially (median, p99), then C concurrent clients
   (req/s, median, p99). Every response must be status Success with the expected stdout; anything else is an error.
3. codegym `/run_code` cache hits: a server with the cache on (and CODEGYM_SANDBOX_FUSION_CACHE=1), the same
   request over and over, sequentially (median, p99: a hit should come back in well under a millisecond) and
   from C clients (req/s).
4. The same no-cache rows on the docker and podman backends (`--engines`), when the engine answers and has
   the runtime image (`--image`, never pulled; otherwise the rows are skipped with a note), and docker's
   throughput with one worker, to show it scales with `--workers`.
5. Baselines with docker: `docker run --rm` per run (a new container each time; at most 40 runs) and
   `docker exec` per run into a running container.
6. gVisor (`--engines docker-gvisor,podman-gvisor`): an exec per run into a running container on runsc (at
   most 40 runs), and the cost of a fork there, each against the same on the engine's default runtime (runc),
   as a ratio; and the no-cache `/run_code` rows on the engine with CODEGYM_SANDBOX_CONTAINER_RUNTIME=runsc
   where the agent can run on it (else a note says why not).

Load generator (the concurrent rows). On a 2-core machine the client shares the CPU with the server, so a
heavy client understates the server. The concurrent HTTP rows therefore run in a *separate process*
(multiprocessing, spawn) with C threads, each holding one keep-alive `http.client.HTTPConnection`.
`--client httpx` runs the alternative (C httpx.Client in threads of this process) for comparison: httpx
spends about three times the CPU per request of http.client, which on a small machine comes out of the
server's share. The CPU share the load generator used is printed under the table. The req/s column is still
a floor: the client's CPU is not free.

Bounds: at most --requests requests per phase, each phase stops issuing new requests after --phase-timeout
seconds, each request has a timeout; servers bind 127.0.0.1 only and are stopped in `finally` (also on
Ctrl-C), in their own session so a Ctrl-C reaches only this script.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import math
import multiprocessing as mp
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
from codegym_sandbox.backends.choose import runtime_problem
from codegym_sandbox.backends.local import configured_python
from codegym_sandbox.backends.podman import runtime_flags

HOST = "127.0.0.1"
WARMUP = 20
REQ_TIMEOUT_S = 30.0
NOTES: list[str] = []  # printed under the table


def note(msg: str) -> None:
    print(msg, flush=True)
    NOTES.append(msg)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def pct(lat: list[float], q: float) -> float:
    """Nearest-rank percentile of latencies in seconds, in milliseconds."""
    xs = sorted(lat)
    return xs[max(0, math.ceil(q * len(xs)) - 1)] * 1000


@dataclass
class Row:
    mode: str
    lat: list[float] = field(default_factory=list)  # seconds, one per completed request
    rate: float | None = None  # req/s, only for concurrent phases
    errors: int = 0
    note: str = ""

    def median_ms(self) -> float | None:
        return statistics.median(self.lat) * 1000 if self.lat else None

    def p99_ms(self) -> float | None:
        return pct(self.lat, 0.99) if self.lat else None


def _fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


# --------------------------------------------------------------------------------------------- phases


def run_sequential(one: Callable[[int], bool], ids: range, deadline_s: float) -> Row:
    """Call one(i) for each i, one after the other; latency per call."""
    row = Row("")
    end = time.perf_counter() + deadline_s
    for i in ids:
        if time.perf_counter() > end:
            log(f"  phase deadline hit after {len(row.lat)} requests")
            break
        t = time.perf_counter()
        ok = one(i)
        row.lat.append(time.perf_counter() - t)
        row.errors += not ok
    return row


def run_threads(one: Callable[[int], bool], ids: range, conc: int, deadline_s: float) -> Row:
    """C threads pull ids from a shared iterator and call one(i); throughput over the whole batch."""
    row = Row("")
    it = iter(ids)
    lock = threading.Lock()
    end = time.perf_counter() + deadline_s

    def loop() -> tuple[list[float], int]:
        lat: list[float] = []
        errors = 0
        while time.perf_counter() < end:
            with lock:
                i = next(it, None)
            if i is None:
                break
            t = time.perf_counter()
            ok = one(i)
            lat.append(time.perf_counter() - t)
            errors += not ok
        return lat, errors

    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as pool:
        results = list(pool.map(lambda _: loop(), range(conc)))
    elapsed = time.perf_counter() - t0
    for lat, errors in results:
        row.lat += lat
        row.errors += errors
    row.rate = len(row.lat) / elapsed if elapsed > 0 else None
    if len(row.lat) < len(ids):
        log(f"  phase deadline hit after {len(row.lat)} of {len(ids)} requests")
    return row


# ------------------------------------------------------------------------------- fresh interpreter


def subprocess_one(argv_prefix: list[str]) -> Callable[[int], bool]:
    def one(i: int) -> bool:
        try:
            out = subprocess.run([*argv_prefix, f"print({i})"], capture_output=True, text=True, timeout=REQ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False
        return out.returncode == 0 and out.stdout == f"{i}\n"

    return one


def bench_process_rows(label: str, argv_prefix: list[str], args: argparse.Namespace) -> list[Row]:
    one = subprocess_one(argv_prefix)
    n, c = args.requests, args.concurrency
    run_sequential(one, range(-WARMUP, 0), args.phase_timeout)
    log(f"{label}: {n} sequential runs")
    seq = run_sequential(one, range(n), args.phase_timeout)
    seq.mode = f"{label}, sequential"
    log(f"{label}: {n} runs from {c} threads")
    conc = run_threads(one, range(n, 2 * n), c, args.phase_timeout)
    conc.mode = f"{label}, {c} threads"
    return [seq, conc]


def engine_ready(engine: str, image: str) -> bool:
    """Whether ``engine`` answers and has ``image`` (never pulled); notes why not."""
    exe = shutil.which(engine)
    try:
        ok = exe is not None and subprocess.run([exe, "info"], capture_output=True, timeout=20).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        ok = False
    if not ok:
        note(f"{engine}: no engine, rows skipped")
        return False
    assert exe is not None
    if subprocess.run([exe, "image", "inspect", image], capture_output=True, timeout=60).returncode != 0:
        note(f"{engine}: no image {image} (scripts/runtime-image {engine}), rows skipped")
        return False
    return True


def bench_docker_baselines(args: argparse.Namespace) -> list[Row]:
    """What a run costs with a container per run, and with a `docker exec` per run into a live one."""
    if not engine_ready("docker", args.image):
        return []
    docker = shutil.which("docker") or "docker"
    rows = []
    few = argparse.Namespace(**{**vars(args), "requests": min(args.requests, 40)})
    rows += bench_process_rows(
        "`docker run --rm` per run",
        [docker, "run", "--rm", "--network", "none", args.image, "python3", "-I", "-c"],
        few,
    )
    name = f"codegym-bench-{uuid.uuid4().hex[:8]}"
    started = subprocess.run(
        [docker, "run", "-d", "--rm", "--network", "none", "--name", name, args.image, "sleep", "3600"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if started.returncode != 0:
        note(f"docker: could not start {args.image}: {started.stderr.strip()}; `docker exec` rows skipped")
        return rows
    try:
        rows += bench_process_rows("`docker exec` per run", [docker, "exec", name, "python3", "-I", "-c"], args)
    finally:
        subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=60)
    return rows


# A fork that exits at once and its wait, N times: what every program's process and every test costs the box.
FORKS = (
    "import os, time\nt = time.perf_counter()\nfor _ in range(300):\n    pid = os.fork()\n"
    "    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\nprint((time.perf_counter() - t) / 300 * 1e6)"
)


def bench_gvisor(engine: str, args: argparse.Namespace) -> list[Row]:
    """What gVisor costs on ``engine``: an exec per run and a fork in a running container on runsc, against the
    engine's default runtime; then `/run_code` on it, where the agent can run there."""
    exe = shutil.which(engine) or engine
    runtime_run = [exe, *runtime_flags("runsc"), "run"] if engine != "docker" else [exe, "run", "--runtime", "runsc"]
    limits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]  # podman: see backends/podman.py
    rows: list[Row] = []
    few = argparse.Namespace(**{**vars(args), "requests": min(args.requests, 40)})
    names = {kind: f"codegym-bench-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("runc", "runsc")}
    try:
        for kind, run in (("runc", [exe, "run"]), ("runsc", runtime_run)):
            argv = [*run, "-d", "--rm", "--network", "none", *limits, "--name", names[kind]]
            argv += [args.image, "sleep", "3600"]
            started = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if started.returncode != 0:
                note(f"{engine}-gvisor: no container on {kind}: {started.stderr.strip()[-300:]}; rows skipped")
                return rows
        per_run: dict[str, Row] = {}
        for kind in ("runc", "runsc"):
            one = subprocess_one([exe, "exec", names[kind], "python3", "-I", "-c"])
            run_sequential(one, range(-WARMUP // 4, 0), args.phase_timeout)
            log(f"{engine} exec on {kind}: {few.requests} sequential runs")
            per_run[kind] = run_sequential(one, range(few.requests), args.phase_timeout)
            per_run[kind].mode = f"`{engine} exec` per run on {kind}, sequential"
            rows.append(per_run[kind])
        forks = {}
        for kind in ("runc", "runsc"):
            samples = []
            for _ in range(5):
                out = subprocess.run(
                    [exe, "exec", names[kind], "python3", "-I", "-c", FORKS],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                samples.append(float(out.stdout) if out.returncode == 0 else math.nan)
            forks[kind] = statistics.median(samples)
        native, gvisor = per_run["runc"].median_ms(), per_run["runsc"].median_ms()
        if native and gvisor:
            note(f"{engine}-gvisor: an exec per run costs {gvisor / native:.1f}x the same on runc (median)")
        note(
            f"{engine}-gvisor: a fork (and its exit and wait) in a running container: {forks['runsc']:.0f} us on "
            f"runsc, {forks['runc']:.0f} us on runc: {forks['runsc'] / forks['runc']:.1f}x"
        )
    finally:
        for name in names.values():
            subprocess.run([exe, "rm", "-f", name], capture_output=True, timeout=60)
    problem = runtime_problem(engine, args.image, "runsc")
    if problem is not None:
        note(f"codegym `/run_code` on {engine}-gvisor: rows skipped: {problem}")
        return rows
    return rows + bench_server(False, args.port or free_port(), args, backend=engine, runtime="runsc")


# ------------------------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def start_server(
    port: int, workers: int, cache: bool, backend: str = "local", runtime: str = ""
) -> subprocess.Popen[bytes]:
    if not port_is_free(port):
        raise SystemExit(f"port {port} is in use; refusing to benchmark a server this script did not start")
    # /run_code is cached only when the server is told to (as upstream, it runs every request by default).
    env = dict(
        os.environ,
        CODEGYM_SANDBOX_CACHE_ENTRIES="65536" if cache else "0",
        CODEGYM_SANDBOX_FUSION_CACHE="1" if cache else "0",
        CODEGYM_SANDBOX_CONTAINER_RUNTIME=runtime,
    )
    exe = shutil.which("codegym-sandbox", path=os.path.dirname(sys.executable)) or shutil.which("codegym-sandbox")
    cmd = [exe] if exe else [sys.executable, "-m", "codegym_sandbox.cli"]
    cmd += ["serve", "--host", HOST, "--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    cmd += ["--backend", backend]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        calm = 0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the sandbox exited with {proc.returncode} before it was ready")
            try:
                r = httpx.get(f"http://{HOST}:{port}/readyz", timeout=2)
                # Wait for every worker, not just the first one. /readyz answers 200 once the workers the pool
                # starts ahead (parked for lending) are up; none starting on two readings half a second apart
                # as well, since their starts take the CPUs the bench measures.
                ready = r.json() if r.status_code == 200 else {}
                settled = ready and ready.get("alive", 0) >= ready.get("workers", 0) and not ready.get("starting")
                calm = calm + 1 if settled else 0
                if calm >= 2:
                    return proc
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5 if calm else 0.1)
        raise SystemExit("the sandbox did not become ready within 60 s")
    except BaseException:
        stop_server(proc)
        raise


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        log("server did not stop on SIGTERM; killing its process group")
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def expected(i: int, same: bool) -> tuple[str, str]:
    """(code, expected stdout) for request i."""
    return ("print(0)", "0\n") if same else (f"print({i})", f"{i}\n")


def good_response(status: int, body: bytes, want: str) -> bool:
    if status != 200:
        return False
    try:
        r = json.loads(body)
        return bool(r["status"] == "Success" and r["run_result"]["stdout"] == want)
    except (ValueError, KeyError, TypeError):
        return False


def httpx_one(client: httpx.Client, same: bool) -> Callable[[int], bool]:
    def one(i: int) -> bool:
        code, want = expected(i, same)
        try:
            r = client.post("/run_code", json={"code": code, "language": "python"})
        except httpx.HTTPError:
            return False
        return good_response(r.status_code, r.content, want)

    return one


def rawclient_one(port: int, same: bool) -> Callable[[int], bool]:
    """A request function over http.client keep-alive connections, one per calling thread."""
    local = threading.local()

    def one(i: int) -> bool:
        code, want = expected(i, same)
        body = json.dumps({"code": code, "language": "python"}).encode()
        for attempt in range(2):
            c = getattr(local, "conn", None)
            if c is None:
                c = local.conn = http.client.HTTPConnection(HOST, port, timeout=REQ_TIMEOUT_S)
            try:
                c.request("POST", "/run_code", body, {"Content-Type": "application/json"})
                r = c.getresponse()
                return good_response(r.status, r.read(), want)
            except (OSError, http.client.HTTPException):
                c.close()
                local.conn = None
                if attempt:  # a keep-alive connection the server closed gets one retry
                    return False
        return False

    return one


def _rawclient_main(port: int, ids: tuple[int, int], conc: int, same: bool, deadline_s: float, conn: Any) -> None:
    """Child process: C threads with one keep-alive http.client connection each; sends back (lat, errors, rate)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates us
    one = rawclient_one(port, same)

    try:
        # warm-up: opens every thread's connection too
        run_threads(one, range(ids[0] - WARMUP * conc, ids[0]), conc, deadline_s)
        cpu0, t0 = time.process_time(), time.perf_counter()
        row = run_threads(one, range(*ids), conc, deadline_s)
        cpu_share = (time.process_time() - cpu0) / (time.perf_counter() - t0)
        conn.send((row.lat, row.errors, row.rate, cpu_share, None))
    except BaseException as exc:  # report, don't hang the parent
        conn.send(([], 0, None, None, repr(exc)))
    finally:
        conn.close()


def concurrent_http(port: int, ids: range, same: bool, args: argparse.Namespace) -> Row:
    c = args.concurrency
    if args.client == "httpx":
        clients = [httpx.Client(base_url=f"http://{HOST}:{port}", timeout=REQ_TIMEOUT_S) for _ in range(c)]
        try:
            ones = [httpx_one(cl, same) for cl in clients]
            tid = itertools.count()
            local = threading.local()

            def one(i: int) -> bool:
                if not hasattr(local, "k"):
                    local.k = next(tid) % c
                return ones[local.k](i)

            run_threads(one, range(ids.start - WARMUP * c, ids.start), c, args.phase_timeout)
            cpu0, t0 = time.process_time(), time.perf_counter()
            row = run_threads(one, ids, c, args.phase_timeout)
            share = (time.process_time() - cpu0) / (time.perf_counter() - t0)  # whole process, so an upper bound
            row.note = f"load generator used {share:.0%} of a core"
            return row
        finally:
            for cl in clients:
                cl.close()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_rawclient_main, args=(port, (ids.start, ids.stop), c, same, args.phase_timeout, child), daemon=True
    )
    proc.start()
    child.close()
    try:
        if not parent.poll(2 * args.phase_timeout + 60):
            raise SystemExit("the load-generator process did not answer in time")
        lat, errors, rate, cpu_share, exc = parent.recv()
        if exc:
            raise SystemExit(f"the load-generator process failed: {exc}")
        proc.join(10)
        note = f"load generator used {cpu_share:.0%} of a core" if cpu_share is not None else ""
        return Row("", lat=lat, rate=rate, errors=errors, note=note)
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        parent.close()


def bench_server(
    cache: bool,
    port: int,
    args: argparse.Namespace,
    backend: str = "local",
    workers: int | None = None,
    runtime: str = "",
) -> list[Row]:
    n, c = args.requests, args.concurrency
    workers = workers or args.workers
    where = "" if backend == "local" else f" on {backend}" + (f" ({runtime})" if runtime else "")
    where += "" if workers == args.workers else f" ({workers} workers)"
    label = f"codegym `/run_code`{where}, cache hits" if cache else f"codegym `/run_code`{where}, no cache"
    log(f"{label}: starting server on {HOST}:{port} with {workers} workers")
    proc = start_server(port, workers, cache, backend, runtime)
    rows = []
    try:
        if not cache:
            one = rawclient_one(port, same=False)
            run_sequential(one, range(-WARMUP, 0), args.phase_timeout)
            log(f"{label}: {n} sequential requests (one keep-alive http.client connection)")
            seq = run_sequential(one, range(n), args.phase_timeout)
            seq.mode = f"{label}, sequential"
            rows.append(seq)
            log(f"{label}: {n} requests from {c} concurrent clients ({args.client})")
            conc = concurrent_http(port, range(10**6, 10**6 + n), False, args)
        else:
            one = rawclient_one(port, same=True)
            run_sequential(one, range(-WARMUP, 0), args.phase_timeout)
            log(f"{label}: {n} identical sequential requests (one keep-alive http.client connection)")
            seq = run_sequential(one, range(n), args.phase_timeout)
            seq.mode = f"{label}, sequential"
            rows.append(seq)
            log(f"{label}: {n} identical requests from {c} concurrent clients ({args.client})")
            conc = concurrent_http(port, range(10**6, 10**6 + n), True, args)
        conc.mode = f"{label}, {c} clients"
        rows.append(conc)
        if proc.poll() is not None:
            raise SystemExit(f"the sandbox exited with {proc.returncode} during the run")
    finally:
        log(f"{label}: stopping server")
        stop_server(proc)
    return rows


# --------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=400, help="requests per measured phase (default 400)")
    ap.add_argument("--concurrency", type=int, default=8, help="concurrent clients / threads (default 8)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="sandbox workers (default: CPU count)")
    ap.add_argument("--port", type=int, default=0, help="port for the sandbox servers (default: a free one)")
    ap.add_argument(
        "--client",
        choices=["process", "httpx"],
        default="process",
        help="concurrent load generator: http.client threads in a separate process (default) or httpx "
        "clients in threads of this process",
    )
    ap.add_argument("--phase-timeout", type=float, default=120.0, help="max seconds per phase (default 120)")
    ap.add_argument(
        "--image",
        default="codegym-sandbox-runtime:latest",
        help="runtime image for the container rows (never pulled; build it with scripts/runtime-image)",
    )
    ap.add_argument(
        "--engines",
        default="docker,podman",
        help="container backends to measure, comma-separated (default docker,podman; empty: none); "
        "docker-gvisor and podman-gvisor: what gVisor's runsc costs on that engine",
    )
    args = ap.parse_args()
    if not 1 <= args.requests <= 100_000 or not 1 <= args.concurrency <= 256:
        ap.error("--requests must be 1..100000 and --concurrency 1..256")

    t_start = time.perf_counter()
    rows: list[Row] = []
    python = configured_python()
    rows += bench_process_rows("`python -I` per run (subprocess)", [python, "-I", "-c"], args)
    rows += bench_server(False, args.port or free_port(), args)
    rows += bench_server(True, args.port or free_port(), args)
    engines = [e for e in args.engines.split(",") if e]
    for engine in engines:
        if engine.endswith("-gvisor"):
            if engine_ready(engine.removesuffix("-gvisor"), args.image):
                rows += bench_gvisor(engine.removesuffix("-gvisor"), args)
        elif engine_ready(engine, args.image):
            rows += bench_server(False, args.port or free_port(), args, backend=engine)
            if engine == "docker" and args.workers > 1:  # throughput against the number of workers
                rows += bench_server(False, args.port or free_port(), args, backend=engine, workers=1)[1:]
    if "docker" in engines:
        rows += bench_docker_baselines(args)

    print(
        f"\n{args.requests} requests per phase (+{WARMUP} warm-up), {args.concurrency} concurrent clients "
        f"({args.client} load generator); {os.cpu_count()} cores, {args.workers} sandbox workers; "
        f"{time.perf_counter() - t_start:.0f} s in all; Python runs (local backend and baseline) on {python}\n"
    )
    print("| mode | median ms | p99 ms | req/s | errors |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.mode} | {_fmt(r.median_ms())} | {_fmt(r.p99_ms())} | {_fmt(r.rate, 0)} | {r.errors} |")

    for r in rows:
        if r.note:
            print(f"\n{r.mode}: {r.note}", end="")
    print()
    for msg in NOTES:
        print(msg)

    base_seq, base_conc, seq, conc, hit_seq, hit = rows[:6]

    def check(name: str, value: float | None, limit: float, le: bool, unit: str) -> str:
        ok = value is not None and (value <= limit if le else value >= limit)
        return f"{name} {_fmt(value, 2 if unit == 'ms' else 0)} {unit} {'≤' if le else '≥'} {limit:g}: " + (
            "PASS" if ok else "MISS"
        )

    print(
        "\ntargets (latency from the sequential rows): "
        + "; ".join(
            [
                check("median", seq.median_ms(), 5, True, "ms"),
                check("p99", seq.p99_ms(), 20, True, "ms"),
                check("throughput", conc.rate, 300, False, "req/s"),
                check("cache hits", hit.rate, 2000, False, "req/s"),
                check("cache hit median", hit_seq.median_ms(), 1, True, "ms"),
                *[
                    check(f"{r.mode.split(' on ')[1].split(',')[0]} median", r.median_ms(), 10, True, "ms")
                    for r in rows
                    if " on " in r.mode and r.mode.endswith("no cache, sequential")
                ],
            ]
        )
    )
    if base_seq.median_ms() and seq.median_ms() and base_conc.rate and conc.rate:
        print(
            f"vs a fresh `python -I` per run: {base_seq.median_ms() / seq.median_ms():.1f}x lower median latency, "
            f"{conc.rate / base_conc.rate:.1f}x the throughput"
        )
    total_errors = sum(r.errors for r in rows)
    if total_errors:
        print(f"\n{total_errors} requests failed (wrong status or stdout)")
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        log("interrupted; servers stopped")
        sys.exit(130)
