"""GRPO reward scoring: a group of completions x stdin tests through the sandbox, vs one /run_code per run.

Starts a codegym sandbox (local backend, one worker per core, cache off) on a free loopback port, then
scores a group of N distinct programs (by default 256, three of four right) against T stdin tests (by
default 10):

- codegym reward path: the trainer's SandboxReward (one ``/v1/evaluate`` request for the group);
- baseline: one SandboxFusion-style ``/run_code`` request per program per test, compared client-side,
  with C requests in flight (what a reward that calls ``/run_code`` does).

Prints a markdown table and PASS/MISS for the target (the group scored in <= 5 s). Bounded: every mode
runs a fixed number of requests and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import httpx
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.servers import LoopbackServer, free_port
from codegym_evaluator.tasks import Task
from codegym_trainer.rewards import SandboxReward

TARGET_S = 5.0


def make_task(tests: int) -> Task:
    cases = [{"stdin": f"{i} {i * 3}\n", "expected_stdout": f"{i + i * 3}\n"} for i in range(tests)]
    return Task("bench/sum", "Read two integers and print their sum.", "stdio", cases)


def make_programs(n: int, salt: str) -> list[str]:
    """Distinct programs (no cache can help); every fourth one is wrong."""
    programs = []
    for i in range(n):
        op = "-" if i % 4 == 3 else "+"
        programs.append(f"# {salt} {i}\na, b = map(int, input().split())\nprint(a {op} b)\n")
    return programs


def completions(programs: list[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "assistant", "content": f"```python\n{p}```"}] for p in programs]


async def reward_path(url: str, task: Task, programs: list[str]) -> tuple[float, int]:
    reward = SandboxReward({task.task_id: task}, lambda: Scorer(url, concurrency=8, timeout_per_test=5.0))
    start = time.perf_counter()
    rewards = await reward(
        prompts=[""] * len(programs), completions=completions(programs), task_id=[task.task_id] * len(programs)
    )
    seconds = time.perf_counter() - start
    await reward.aclose()
    if any(r is None for r in rewards):
        raise SystemExit(f"sandbox errors in the reward path: {rewards.count(None)}")
    return seconds, sum(1 for r in rewards if r is not None and r >= 1.0)


async def run_code_path(url: str, task: Task, programs: list[str], concurrency: int) -> tuple[float, int]:
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=60.0) as client:

        async def one(code: str, test: dict[str, str]) -> bool:
            async with sem:
                r = await client.post(
                    f"{url}/run_code",
                    json={"code": code, "language": "python", "stdin": test["stdin"], "run_timeout": 5},
                )
            body = r.json()
            if body["status"] == "SandboxError":
                raise SystemExit(f"sandbox error in the baseline: {body}")
            return body["status"] == "Success" and body["run_result"]["stdout"] == test["expected_stdout"]

        async def program(code: str) -> bool:
            return all(await asyncio.gather(*(one(code, t) for t in task.tests)))

        start = time.perf_counter()
        results = await asyncio.gather(*(program(p) for p in programs))
        return time.perf_counter() - start, sum(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", type=int, default=256, help="completions in the group (default 256)")
    parser.add_argument("--tests", type=int, default=10, help="stdin tests of the task (default 10)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="sandbox workers (default: cores)")
    parser.add_argument("--concurrency", type=int, default=8, help="baseline requests in flight (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions of each mode (default 3)")
    args = parser.parse_args()

    port = free_port()
    argv = [
        "env",
        "CODEGYM_SANDBOX_CACHE_ENTRIES=0",
        sys.executable,
        "-m",
        "codegym_sandbox.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--backend",
        "local",
        "--workers",
        str(args.workers),
        "--log-level",
        "warning",
    ]
    task = make_task(args.tests)
    expected_ok = sum(1 for i in range(args.group) if i % 4 != 3)
    rows: list[tuple[str, float, float, int]] = []
    with LoopbackServer("sandbox", argv, port, "/readyz") as server:
        asyncio.run(reward_path(server.url, task, make_programs(8, "warm-up")))
        for name, fn in (
            (
                "codegym reward (one /v1/evaluate per group)",
                lambda salt: reward_path(server.url, task, make_programs(args.group, salt)),
            ),
            (
                f"baseline: /run_code per program per test (C={args.concurrency})",
                lambda salt: run_code_path(server.url, task, make_programs(args.group, salt), args.concurrency),
            ),
        ):
            times = []
            for rep in range(args.repeat):
                seconds, ok = asyncio.run(fn(f"{name[:8]}-{rep}"))
                if ok != expected_ok:
                    raise SystemExit(f"{name}: {ok} programs judged right, expected {expected_ok}")
                times.append(seconds)
            times.sort()
            rows.append((name, times[len(times) // 2], min(times), ok))
    runs = args.group * args.tests
    base = rows[1][1]
    print(
        f"\n{args.group} completions x {args.tests} stdin tests = {runs} runs; {args.workers} sandbox workers, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| mode | median s | best s | runs/s | right | speed-up |")
    print("|---|---|---|---|---|---|")
    for name, median, best, ok in rows:
        print(
            f"| {name} | {median:.2f} | {best:.2f} | {runs / median:.0f} | {ok}/{args.group} | {base / median:.1f}x |"
        )
    verdict = "PASS" if rows[0][1] <= TARGET_S else "MISS"
    print(
        f"\ntarget: a group of {args.group} x {args.tests} scored in <= {TARGET_S:.0f} s: {verdict} "
        f"({rows[0][1]:.2f} s)"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
