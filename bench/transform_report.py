"""How many HumanEval solutions each transformation rewrites, and how many of those still pass their tests.

    . .venv/bin/activate
    python bench/transform_report.py                   # --seeds 0 --workers 2; --help

Every transformation of ``codegym_data.transform`` on its own, then all of them composed into one, is applied
to the 164 canonical solutions (prompt and body as one program) for each seed of ``--seeds``; every rewritten
program and every original is judged in a codegym sandbox started on 127.0.0.1 (or ``--sandbox-url``), through
``codegym_data.verify.transform_and_verify``, the code ``codegym-data transform`` runs. Prints a markdown
table: per transformation, the rows it rewrote (counted once per seed), how many of those still pass, the share,
and how many were dropped. Exit status 1 when any rewrite was dropped or a transformation failed on a row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

from codegym_data.report import TransformStats
from codegym_data.transform import Compose, parse_transformations
from codegym_data.verify import transform_and_verify
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.servers import sandbox_server
from codegym_evaluator.tasks import Task, load_tasks


async def judge(url: str, tasks: list[Task], seed: int, dataset: str) -> list[TransformStats]:
    """Each transformation alone, then all composed, on ``tasks`` with ``seed``: the report's counts."""
    transformations = [*parse_transformations("all"), Compose(parse_transformations("all"))]
    async with Scorer(url, concurrency=8) as scorer:
        result = await transform_and_verify(tasks, transformations, scorer, seed=seed, dataset=dataset)
    return result.report.stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds to run (default: 0)")
    parser.add_argument("--dataset", default="humaneval", help="dataset of the task library (default: humaneval)")
    parser.add_argument("--limit", type=int, help="only the first N rows")
    parser.add_argument("--workers", type=int, default=2, help="workers of the sandbox started here (default: 2)")
    parser.add_argument("--sandbox-url", help="a running sandbox instead of starting one")
    args = parser.parse_args()

    tasks = load_tasks(args.dataset, limit=args.limit)
    totals: dict[str, TransformStats] = {}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        url = args.sandbox_url or stack.enter_context(sandbox_server(args.workers)).url
        for seed in args.seeds:
            for stats in asyncio.run(judge(url, tasks, seed, args.dataset)):
                name = "all composed" if "+" in stats.transformation else stats.transformation
                total = totals.setdefault(name, TransformStats(name))
                for field in (
                    "rows",
                    "not_applicable",
                    "errors",
                    "applied",
                    "original_failed",
                    "sandbox_errors",
                    "passed",
                    "dropped",
                ):
                    setattr(total, field, getattr(total, field) + getattr(stats, field))
    seconds = time.monotonic() - started
    seeds = ", ".join(map(str, args.seeds))
    runs = len(tasks) * len(args.seeds)
    print(f"{args.dataset}: {len(tasks)} rows x seeds {seeds}; {seconds:.0f} s including the sandbox's start\n")
    print(f"| transformation | rewritten (of {runs}) | still passing | share | dropped | original fails | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for t in totals.values():
        share = f"{t.pass_share:.1%}" if t.pass_share is not None else "-"
        row = [t.transformation, t.applied, t.passed, share, t.dropped, t.original_failed, t.errors]
        print("| " + " | ".join(map(str, row)) + " |")
    bad = sum(t.dropped + t.errors for t in totals.values())
    if bad:
        print(f"\n{bad} rewrites dropped or failed (listed in dropped.jsonl by codegym-data)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
