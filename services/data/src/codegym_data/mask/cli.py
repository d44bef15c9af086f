"""``codegym-data mask``: fill-in-the-middle rows from reference solutions, spans chosen by complexity metrics,
every row verified in the sandbox. ``add_parser`` registers the subcommand."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from ..options import add_command, add_settings_flags, progress_bars, run_with_settings, sandbox_urls
from .config import MaskConfig

DESCRIPTION = """\
Cut fill-in-the-middle training rows out of the reference solutions of a dataset of the task library. Each
function of a solution gets a masked span with --probability; the span (a statement or a block of its body)
is drawn with a chance that grows with its complexity metrics (--metrics: cyclomatic complexity, Halstead
volume, nesting depth, lines, statements). Every row is judged in the codegym sandbox: the program with the
span's own text put back must pass the row's tests, and (unless --no-require-tested) the program with the
span replaced by `pass` must fail them, so the tests can tell a right fill from a wrong one. Rows that fail
either are dropped and counted.
"""

EPILOG = """\
examples:
  codegym-data mask --list-metrics
  codegym-data mask --dataset humaneval --probability 1 --seed 0 --out masked/
  codegym-data mask --metrics cyclomatic=2,nesting_depth --minimum cyclomatic=2 --max-lines 8 --out masked/
  codegym-data mask --dataset mbpp --path mbpp/ --fim-format psm --sandbox-url http://127.0.0.1:8080
  codegym-data mask --fim-format psm --fim-tokens '<PRE>,<SUF>,<MID>' --limit 20 --out masked/

Output (--out DIR): masked.jsonl (one row a line: id <task_id>#mask:<function>:<first>-<last line>, prefix,
middle, suffix, the span and its metrics, and the tests, entry point and starter code that judge a fill;
with --fim-format psm also prompt, completion and text), report.md and report.json (counts from tasks to
emitted rows, and each metric's distribution over functions, candidate spans and emitted spans),
dropped.jsonl (each selected span not emitted, and why).
Every flag is also an environment variable CODEGYM_DATA_MASK_<FIELD>.
"""


def add_parser(sub: Any) -> None:
    """Register ``mask`` on the ``codegym-data`` subparsers ``sub``."""
    parser = add_command(
        sub,
        "mask",
        help="mask spans of reference solutions chosen by complexity metrics, write verified FIM rows and a report",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("--list-metrics", action="store_true", help="Say what each metric counts, then exit.")
    add_settings_flags(parser, MaskConfig)
    parser.set_defaults(func=_mask)


def list_metrics() -> str:
    """What each metric counts: the metrics module's own account of them."""
    from . import metrics

    return (metrics.__doc__ or "").strip().replace("``", "`")


def _mask(args: argparse.Namespace) -> int:
    if args.list_metrics:
        print(list_metrics())
        return 0
    return run_with_settings(MaskConfig, args, run_mask)


def run_mask(config: MaskConfig) -> int:
    """Load, mask, verify and write; the report's tables on stdout."""
    from codegym_evaluator.scoring import Scorer
    from codegym_evaluator.tasks import load_tasks

    from .dataset import CodeMaskDataset
    from .fim import parse_tokens
    from .verify import mask_and_verify

    masker = CodeMaskDataset(
        config.metrics,
        config.probability,
        config.seed,
        minimum=config.minimum,
        max_lines=config.max_lines,
        spans_per_function=config.spans_per_function,
        dataset=config.dataset,
    )
    tasks = load_tasks(
        config.dataset, split=config.split, limit=config.limit, difficulty=config.difficulty, path=config.path
    )
    with contextlib.ExitStack() as stack:
        urls = stack.enter_context(sandbox_urls(config.sandbox_url, config.sandbox_workers))
        progress = progress_bars(stack, lambda stage: "task" if stage == "masking" else "fill")

        async def go() -> Any:
            async with Scorer(
                urls,
                token=config.sandbox_token,
                concurrency=config.concurrency,
                timeout_per_test=config.timeout_per_test,
            ) as scorer:
                return await mask_and_verify(
                    tasks, masker, scorer, require_tested=config.require_tested, progress=progress
                )

        run = asyncio.run(go())
    paths = run.write(config.out, config.fim_format, parse_tokens(config.fim_tokens))
    print(run.report.table())
    print(
        f"\n{len(run.rows)} rows in {paths['masked.jsonl']}; report: {paths['report.md']}; "
        f"not emitted: {paths['dropped.jsonl']}"
    )
    unjudged = [d for d in run.dropped if d.reason == "sandbox_error"]
    if unjudged:
        print(
            f"codegym-data: error: the sandbox could not judge {len(unjudged)} rows (they are not emitted); "
            f"the first: {unjudged[0].error}",
            file=sys.stderr,
        )
        return 1
    return 0
