"""TRL's code environment (``codegym_evaluator.trl_env.CodeEnvironment``) against a stateless sandbox call, and
a GRPO step's tool rounds through TRL's own tool loop: how much of the step waits on the sandbox.

    . .venv/bin/activate
    python bench/env_bench.py                     # both tables; --help
    python bench/env_bench.py --quick             # a smoke run of about 20 s

Each table is measured against a baseline in the same run, on the same server (ratios, not absolute times,
are what carries between machines). The server is started here on loopback (local backend, result cache off,
so every run is a run) and stopped in ``finally``.

1. **Round trips**: a tool call through the environment, awaited on an event loop in a thread of its own as
   TRL awaits its async tools, against the same work as one stateless ``/v1/evaluate`` call through the sandbox
   client on the same loop (``batch_runs=0``: alone, not batched): ``run_python`` with a trivial cell (``1``)
   against a trivial program (``print(1)``, one test), and ``run_tests`` of a right program on 10 stdin tests
   against the very request it sends (the row has 11 tests: one is always hidden). A cell through the client's
   session directly separates the environment's own cost from the session's. Median and p90 of ``--requests``
   calls each, taking turns.
2. **A GRPO step**: ``--batch`` rollouts (64) of ``--rounds`` tool rounds (4: two ``run_python`` cells, a wrong
   then a right program to ``run_tests``, 3 of its 11 tests public) through TRL's own
   ``GRPOTrainer._tool_call_loop``, the installed TRL's code, called on a stand-in for the trainer whose
   generation is scripted: each turn (the first completion, then one after each tool round) sleeps ``--gen-ms``
   (one batched generation of every rollout still calling tools) and answers the next scripted tool call
   (``parse_response`` is patched to read it back). Around the loop the step does what TRL's ``_generate``
   and ``_calculate_rewards`` do with an ``environment_factory``: ``reset(**row)`` of each pooled environment
   in turn (which deletes the previous rollout's session), and ``get_reward()`` of each, awaited one after
   another as TRL's wrapper does. TRL runs one rollout's tool calls after another's (its synchronous loop),
   so the sandbox's latency multiplies by the batch; the last row runs the same calls with every rollout of a
   round at once (``asyncio.gather``), for comparison: what a concurrent loop would wait.

The share of the step spent waiting on the sandbox is (wall - generation) / wall, where generation is the
time slept for it; the sandbox time per step is the rest, which is what carries to another ``--gen-ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, TypeVar
from unittest import mock

from codegym_evaluator.scoring import evaluate_body
from codegym_evaluator.trl_env import CodeEnvironment
from codegym_evaluator.trl_rows import split_row
from codegym_sandbox.client import AsyncSandboxClient, AsyncSession
from load_bench import ServerProcess

T = TypeVar("T")
Step = dict[str, float]  # a step's wall, generation, reset and reward seconds
PAIRS = [(1, 2), (5, 5), (7, 8), (10, 20), (0, 0), (-3, 4), (99, 1), (123, 456), (1000, -1), (42, 58), (6, 7)]
CASES = [{"input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in PAIRS]
ROW = {"prompt": [{"role": "user", "content": "Add two numbers."}], "verification_info": {"test_cases": CASES}}
TRIVIAL_ROW = {"verification_info": {"test_cases": [{"input": "", "output": "1\n"}]}}
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"
SESSION_MB = 128  # the server's default session memory here, so the kernels it starts ahead serve the rollouts


class Loop:
    """An event loop in a daemon thread, like the one TRL awaits its async tools and rewards on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="bench-trainer-loop", daemon=True).start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


def start_server(batch: int) -> ServerProcess:
    env = {
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_SANDBOX_CACHE_ENTRIES": "0",
        # Every rollout of the batch holds a session until its environment's next reset (TRL's pool), and
        # kernels are started ahead beside them.
        "CODEGYM_SANDBOX_SESSIONS__MAX_SESSIONS": str(batch + 8),
        "CODEGYM_SANDBOX_SESSIONS__MAX_SESSIONS_PER_CLIENT": str(batch + 8),
        "CODEGYM_SANDBOX_SESSIONS__MEMORY_MB": str(SESSION_MB),
        # Sessions take their memory limits (not what they use) from the budget: one that holds the batch's.
        "CODEGYM_SANDBOX_MEMORY_BUDGET_MB": str((batch + 8) * SESSION_MB * 2 + 4096),
    }
    return ServerProcess(env, ["--workers", "2", "--log-level", "warning"]).start(ready_timeout=120)


def quantile(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q * 100) - 1] if len(xs) > 1 else xs[0]


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"env_bench: {what}")


def round_trips(url: str, loop: Loop, n: int) -> list[str]:
    """Table 1: each tool call against the stateless call that does the same work, on the same server."""
    client = AsyncSandboxClient(url, batch_runs=0)  # the baseline: one /v1/evaluate per call
    env = CodeEnvironment(url, public_tests=10)
    env.reset(**ROW)
    trivial, _ = split_row(TRIVIAL_ROW, 1)
    task, visible = split_row(ROW, 10)  # as the environment splits it: 10 public tests, one hidden
    expect(len(visible) == 10, f"the row shows {len(visible)} tests, not 10")
    tests = replace(task, tests=visible)  # what run_tests sends: the public ones
    session = loop.call(_open(client))
    counter = iter(range(10**9))

    def evaluate(task: Any, program: str) -> None:
        # A comment makes each program distinct, as every rollout's are (the server's cache is off as well).
        body = evaluate_body(task, [f"{program}# {next(counter)}\n"], timeout_s=env.timeout_s, cache=False)
        out = loop.call(client.evaluate(body)).results[0]
        expect(out.verdict == "AC" and out.passed == out.total, f"the baseline was judged {out.verdict}")

    def run_python() -> None:
        expect(loop.call(env.run_python("1")) == "1", "run_python('1') did not answer 1")

    def run_cell() -> None:
        expect(loop.call(session.execute("1")).error is None, "a session cell failed")

    def run_tests() -> None:
        answer = loop.call(env.run_tests(f"{RIGHT}# {next(counter)}\n"))
        expect(answer.startswith("All 10 tests passed."), f"run_tests answered {answer!r}")

    rows: dict[str, Callable[[], None]] = {
        "trivial: stateless `/v1/evaluate`, `print(1)` on one test (baseline)": lambda: evaluate(trivial, "print(1)\n"),
        "trivial: `CodeEnvironment.run_python('1')`": run_python,
        "trivial: a cell through the client's session directly": run_cell,
        "10 tests: stateless `/v1/evaluate` of a right program (baseline)": lambda: evaluate(tests, RIGHT),
        "10 tests: `CodeEnvironment.run_tests` of the same program": run_tests,
    }
    for fn in rows.values():  # warm: connections, the session's kernel, the workers
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(n):  # the rows take turns, so a burst of load on the machine falls on all of them
        for name, fn in rows.items():
            times[name].append(timed(fn))
    loop.call(session.close())
    env.reset(**ROW)  # deletes its session
    loop.call(client.aclose())

    out = [f"\n### Round trips: {n} calls each, sequential, on one event loop\n"]
    out.append("| call | median ms | p90 ms | vs its baseline |\n|---|---:|---:|---:|")
    base = 0.0
    for name, xs in times.items():
        med = statistics.median(xs)
        base = med if "baseline" in name else base
        out.append(f"| {name} | {med * 1000:.2f} | {quantile(xs, 0.9) * 1000:.2f} | {med / base:.2f}x |")
    return out


async def _open(client: AsyncSandboxClient) -> AsyncSession:
    return await client.session("python", ttl_s=600)


class ScriptedTrainer:
    """What ``GRPOTrainer._tool_call_loop`` reads of its trainer, with no model: generation sleeps ``gen_s`` per
    turn and gives each rollout its next scripted completion (a token naming the rollout, read back by the
    patched ``parse_response``)."""

    def __init__(self, envs: list[CodeEnvironment], loop: Loop, rounds: int, gen_s: float) -> None:
        self.async_loop = loop.loop
        self.use_vllm, self.vllm_mode, self._is_vlm = False, "server", False
        self.max_tool_calling_iterations = rounds
        self.max_completion_length = 10**9
        self.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=10**9))
        self._tokenizer = None
        self.environment_factories = {None: CodeEnvironment}
        self._batch_environments = [None] * len(envs)
        self._env_tools: dict[None, list[Any]] = {None: []}
        self.tools: list[Any] = []
        # As TRL's _generate builds them: every public method but reset and get_reward, sorted into sync and async.
        tools = ("run_python", "run_tests", "submit")
        self._sync_tool_dicts: list[dict[str, Any]] = [{} for _ in envs]
        self._async_tool_dicts = [{name: getattr(env, name) for name in tools} for env in envs]
        self.gen_s, self.generated_s = gen_s, 0.0
        self.turn = [0] * len(envs)
        self.script: list[list[dict[str, Any]]] = []

    def _get_tool_suffix_ids(self, tool_messages: list[dict[str, Any]]) -> list[int]:
        return [0] * len(tool_messages)

    def generate(self) -> None:
        t = time.perf_counter()
        time.sleep(self.gen_s)
        self.generated_s += time.perf_counter() - t

    def _generate_single_turn(
        self, prompt_ids: list[list[int]], images: Any, fields: Any, num_generations: int, has_tool_images: bool = False
    ) -> tuple[list[list[int]], None]:
        self.generate()
        return [[ids[0]] for ids in prompt_ids], None  # each rollout's first prompt token: its index

    def parse_response(self, tokenizer: Any, ids: list[int], prefix: Any = None, tools: Any = None) -> dict[str, Any]:
        rollout = ids[0]
        self.turn[rollout] += 1
        return self.script[rollout][self.turn[rollout]]


def completions(step: int, rollout: int, rounds: int) -> list[dict[str, Any]]:
    """A rollout's assistant turns: a tool call in each of the first ``rounds``, then a final answer."""
    tag = f"# step {step} rollout {rollout}\n"  # every rollout's programs its own, as a policy's samples are
    calls = [
        ("run_python", f"{tag}def add(a, b):\n    return a + b"),
        ("run_python", f"{tag}add(2, 3), add(-1, 1)"),
        ("run_tests", WRONG + tag),
        ("run_tests", RIGHT + tag),
    ]
    turns = []
    for i in range(rounds):
        name, code = calls[i % len(calls)]
        call = {"type": "function", "function": {"name": name, "arguments": {"code": code}}}
        turns.append({"role": "assistant", "content": "", "tool_calls": [call]})
    return [*turns, {"role": "assistant", "content": "Done."}]


def grpo_step(
    trainer: ScriptedTrainer, envs: list[CodeEnvironment], loop: Loop, step: int, rounds: int
) -> dict[str, Any]:
    from trl.trainer import grpo_trainer

    batch = len(envs)
    trainer.script = [completions(step, i, rounds) for i in range(batch)]
    trainer.turn = [0] * batch
    trainer.generated_s = 0.0
    started = time.perf_counter()
    reset_s = timed(lambda: [env.reset(**ROW) for env in envs])  # TRL: each pooled environment in turn
    trainer.generate()  # the first completion of every rollout
    prompts = [[{"role": "user", "content": "Add two numbers."}] for _ in range(batch)]
    prompt_ids = [[i] for i in range(batch)]
    firsts = [[script[0]] for script in trainer.script]
    with mock.patch.object(grpo_trainer, "parse_response", trainer.parse_response):
        out = grpo_trainer.GRPOTrainer._tool_call_loop(
            trainer, prompts, prompt_ids, [[i] for i in range(batch)], firsts, None, None, None
        )
    tool_calls, failures = out[4], out[5]
    reward_s = time.perf_counter()
    rewards = loop.call(_rewards(envs))  # TRL's get_reward wrapper: awaited one environment after another
    reward_s = time.perf_counter() - reward_s
    wall = time.perf_counter() - started
    expect(failures == 0 and tool_calls == batch * rounds, f"{failures} of {tool_calls} tool calls failed")
    expect(all(r == 1.0 for r in rewards) or rounds < 4, f"rewards {rewards}")
    answers = [m["content"] for m in out[1][0] if m["role"] == "tool"]
    expect(len(answers) == rounds, f"rollout 0 got {len(answers)} tool answers")
    return {"wall": wall, "gen": trainer.generated_s, "reset": reset_s, "reward": reward_s}


async def _rewards(envs: list[CodeEnvironment]) -> list[float | None]:
    return [await env.get_reward() for env in envs]


def concurrent_rounds(envs: list[CodeEnvironment], loop: Loop, step: int, rounds: int) -> float:
    """The same tool calls with every rollout of a round at once: the sandbox time a concurrent loop waits."""
    for env in envs:
        env.reset(**ROW)
    scripts = [completions(step, i, rounds) for i in range(len(envs))]

    async def one_round(r: int) -> None:
        calls = [(env, script[r]["tool_calls"][0]["function"]) for env, script in zip(envs, scripts, strict=True)]
        await asyncio.gather(*(getattr(env, f["name"])(**f["arguments"]) for env, f in calls))

    async def rewards() -> list[float | None]:
        return list(await asyncio.gather(*(env.get_reward() for env in envs)))

    t = time.perf_counter()
    for r in range(rounds):
        loop.call(one_round(r))
    got = loop.call(rewards())
    expect(all(r == 1.0 for r in got) or rounds < 4, f"rewards {got}")
    return time.perf_counter() - t


def steps_table(url: str, loop: Loop, batch: int, rounds: int, steps: int, gen_ms: float) -> list[str]:
    envs = [CodeEnvironment(url, public_tests=3) for _ in range(batch)]  # TRL's pool: built once, reused
    trainer = ScriptedTrainer(envs, loop, rounds, gen_ms / 1000)
    grpo_step(trainer, envs, loop, -1, rounds)  # warm: the pool's sessions, connections, workers
    runs = [grpo_step(trainer, envs, loop, s, rounds) for s in range(steps)]
    together = concurrent_rounds(envs, loop, steps, rounds)  # once: the comparison, not the measurement
    for env in envs:
        env.reset(**ROW)  # deletes the last sessions
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    sandbox = med["wall"] - med["gen"]
    turns = rounds + 1
    out = [f"\n### A GRPO step: {batch} rollouts x {rounds} tool rounds, {turns} generation turns of {gen_ms:g} ms\n"]
    out.append(f"Median of {steps} steps (after one to warm up), through TRL's `_tool_call_loop`.\n")
    out.append("| what | s per step | share of the step |\n|---|---:|---:|")
    out.append(f"| the step (wall) | {med['wall']:.2f} | 100% |")
    out.append(
        f"| generation (simulated, {turns} x {gen_ms:g} ms) | {med['gen']:.2f} | {med['gen'] / med['wall']:.0%} |"
    )
    out.append(f"| waiting on the sandbox (wall - generation) | {sandbox:.2f} | {sandbox / med['wall']:.0%} |")
    out.append(f"| of which `reset` of {batch} environments (session deletes) | {med['reset']:.2f} | - |")
    out.append(f"| of which `get_reward` of {batch} rollouts (11 tests each) | {med['reward']:.2f} | - |")
    per_call = (sandbox - med["reset"] - med["reward"]) / (batch * rounds)
    out.append(
        f"| of which {batch * rounds} tool calls, one after another ({per_call * 1000:.1f} ms each) "
        f"| {sandbox - med['reset'] - med['reward']:.2f} | - |"
    )
    seq = sandbox - med["reset"]
    out.append(
        f"| tool calls and rewards with each round's rollouts at once (not TRL's loop; once) | {together:.2f} "
        f"| {together / seq:.2f}x the time of one after another |"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60, help="calls per row of the round-trip table")
    parser.add_argument("--batch", type=int, default=64, help="rollouts per GRPO step")
    parser.add_argument("--rounds", type=int, default=4, help="tool rounds per rollout")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps timed (after one to warm up)")
    parser.add_argument("--gen-ms", type=float, default=1000.0, help="simulated generation per turn, all rollouts")
    parser.add_argument("--quick", action="store_true", help="smoke run: 15 requests, 8 rollouts, 1 step, 100 ms turns")
    if parser.parse_args(argv).quick:  # smaller defaults; a number given on the command line still counts
        parser.set_defaults(requests=15, batch=8, steps=1, gen_ms=100.0)
    args = parser.parse_args(argv)
    print(f"# env_bench: {os.cpu_count()} CPUs, local backend, result cache off")
    server = start_server(args.batch)
    try:
        loop = Loop()
        lines = round_trips(server.url, loop, args.requests)
        lines += steps_table(server.url, loop, args.batch, args.rounds, args.steps, args.gen_ms)
    finally:
        server.stop()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
