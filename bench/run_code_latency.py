"""Trivial Python runs: codegym's /run_code over HTTP vs a fresh `python -I` per run, in one script.

    python bench/run_code_latency.py --requests 300 --concurrency 8

Each codegym request carries distinct code (so nothing is served from the cache) unless the row says
"cache hit". Concurrent clients are threads of this process, so on a small machine they share the CPU
with the server: the req/s column is a floor. Loopback only; bounded by --requests.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_subprocess(n: int, conc: int) -> tuple[list[float], float, int]:
    def one(i: int) -> tuple[float, bool]:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-I", "-c", f"print({i})"], capture_output=True, text=True)
        return time.perf_counter() - t, out.stdout == f"{i}\n"

    lat = [one(i)[0] for i in range(n)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as pool:
        ok = list(pool.map(one, range(n)))
    return lat, n / (time.perf_counter() - t0), sum(not good for _, good in ok)


def bench_http(url: str, n: int, conc: int, same: bool) -> tuple[list[float], float, int]:
    clients = [httpx.Client(base_url=url, timeout=60) for _ in range(conc)]

    def one(i: int) -> tuple[float, bool]:
        code = "print(0)" if same else f"print({i})"
        t = time.perf_counter()
        r = clients[i % conc].post("/run_code", json={"code": code, "language": "python"}).json()
        good = r["status"] == "Success" and r["run_result"]["stdout"] == ("0\n" if same else f"{i}\n")
        return time.perf_counter() - t, good

    for i in range(20):
        one(-1 - i)  # warm up
    lat = [one(i)[0] for i in range(n)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(conc) as pool:
        ok = list(pool.map(one, range(n, 2 * n)))
    rate = n / (time.perf_counter() - t0)
    for c in clients:
        c.close()
    return lat, rate, sum(not good for _, good in ok)


def serve(port: int, workers: int, cache: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CODEGYM_SANDBOX_CACHE_ENTRIES="65536" if cache else "0")
    exe = os.path.join(os.path.dirname(sys.executable), "codegym-sandbox")
    proc = subprocess.Popen(
        [exe, "serve", "--port", str(port), "--workers", str(workers), "--log-level", "warning"], env=env
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the sandbox did not become ready")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    rows = []
    print("subprocess baseline...", file=sys.stderr)
    rows.append(("python -I per run (subprocess)", *bench_subprocess(args.requests, args.concurrency)))
    for cache in (False, True):
        port = _free_port()
        proc = serve(port, args.workers, cache)
        try:
            label = "codegym /run_code, cache hit" if cache else "codegym /run_code, local backend"
            print(f"{label}...", file=sys.stderr)
            rows.append((label, *bench_http(f"http://127.0.0.1:{port}", args.requests, args.concurrency, cache)))
        finally:
            proc.terminate()
            proc.wait()
    print(
        f"\n{args.requests} sequential requests (latency), then {args.requests} with {args.concurrency} clients "
        f"(req/s); {os.cpu_count()} cores, {args.workers} workers\n"
    )
    print("| mode | median ms | p99 ms | req/s | errors |\n|---|---|---|---|---|")
    for label, lat, rate, errors in rows:
        print(f"| {label} | {statistics.median(lat) * 1000:.2f} | {_pct(lat, 0.99):.2f} | {rate:.0f} | {errors} |")
    base, local, hit = rows
    print(
        f"\nspeed-up over a fresh interpreter: {statistics.median(base[1]) / statistics.median(local[1]):.1f}x median, "
        f"{local[2] / base[2]:.1f}x throughput"
    )
    print(
        f"targets: median <= 5 ms: {statistics.median(local[1]) * 1000:.2f}; p99 <= 20 ms: {_pct(local[1], 0.99):.2f}; "
        f">= 300 req/s: {local[2]:.0f}; cache hits >= 2000 req/s: {hit[2]:.0f}"
    )


if __name__ == "__main__":
    main()
