"""``codegym-data``: data tools on the task library. ``transform`` rewrites reference solutions and keeps the
rewrites that still pass their tests."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from .config import TransformConfig
from .mask.cli import add_parser as add_mask_parser
from .options import add_command, add_settings_flags, progress_bars, run_with_settings, sandbox_urls
from .synthesize import cli as synthesize_cli
from .tester import cli as tester_cli

DESCRIPTION = """\
Rewrite the reference solutions of a dataset of the task library with semantics-preserving transformations
(for->while, renaming, if/else inversion, ...), run every rewritten program against the row's tests in the
codegym sandbox, and keep those that still pass. Writes the kept rows as a codegym task file, which
codegym-eval and codegym-train read with --dataset jsonl, and a report of what each transformation did.
"""

EPILOG = """\
examples:
  codegym-data transform --list
  codegym-data transform --dataset humaneval --transform for_to_while,rename --seed 0 --out out/
  codegym-data transform --dataset mbpp --path mbpp/ --transform all --sandbox-url http://127.0.0.1:8080
  codegym-data transform --transform rename+invert_if+dead_code --include-original --out augmented/

Output (--out DIR): tasks.jsonl (the kept rows, ids <task_id>#<transformation>, the rewritten program in
metadata.canonical_solution), report.md and report.json (per transformation: rows, applied, not applicable,
original fails, passed, dropped), dropped.jsonl (each rewrite not kept, with its verdict and code).
Every flag is also an environment variable CODEGYM_DATA_<FIELD>.
"""


def _add_transform(sub: Any) -> None:
    parser = add_command(
        sub,
        "transform",
        help="rewrite reference solutions, verify them in the sandbox, write the kept rows and a report",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("--list", action="store_true", help="List the transformations and what each does, then exit.")
    add_settings_flags(parser, TransformConfig)
    parser.set_defaults(func=_transform)


def list_transformations() -> str:
    """The transformations, one paragraph each: name, summary, and the conditions from its docstring."""
    from .transform import TRANSFORMATIONS

    width = max(len(name) for name in TRANSFORMATIONS)
    lines = [f"{name:<{width}}  {cls.summary}" for name, cls in TRANSFORMATIONS.items()]
    lines += ["", "a+b composes a then b into one transformation. Details:"]
    for name, cls in TRANSFORMATIONS.items():
        doc = textwrap.dedent((cls.__doc__ or "").split("\n", 1)[-1]).strip().replace("``", "`")
        first = (cls.__doc__ or "").split("\n", 1)[0].strip().replace("``", "`")
        lines += ["", f"{name}:", textwrap.indent(textwrap.fill(f"{first} {doc}".strip(), 100), "  ")]
    return "\n".join(lines)


def _transform(args: argparse.Namespace) -> int:
    if args.list:
        print(list_transformations())
        return 0
    return run_with_settings(TransformConfig, args, run_transform)


def run_transform(config: TransformConfig) -> int:
    """Load, transform, verify and write; the report table on stdout."""
    from codegym_evaluator.scoring import Scorer
    from codegym_evaluator.tasks import load_tasks

    from .transform import parse_transformations
    from .verify import transform_and_verify

    transformations = parse_transformations(config.transform)
    tasks = load_tasks(
        config.dataset, split=config.split, limit=config.limit, difficulty=config.difficulty, path=config.path
    )
    with contextlib.ExitStack() as stack:
        urls = stack.enter_context(sandbox_urls(config.sandbox_url, config.sandbox_workers))
        progress = progress_bars(stack, lambda stage: "row" if stage == "transforming" else "program")

        async def go() -> Any:
            async with Scorer(
                urls,
                token=config.sandbox_token,
                concurrency=config.concurrency,
                timeout_per_test=config.timeout_per_test,
            ) as scorer:
                return await transform_and_verify(
                    tasks, transformations, scorer, seed=config.seed, dataset=config.dataset, progress=progress
                )

        run = asyncio.run(go())
    paths = run.write(config.out, tasks if config.include_original else ())
    print(run.report.table())
    kept = len(run.tasks) + (len(tasks) if config.include_original else 0)
    print(f"\n{kept} rows in {paths['tasks.jsonl']}; report: {paths['report.md']}; not kept: {paths['dropped.jsonl']}")
    unjudged = [r for r in run.rejected if r.reason == "sandbox_error"]
    if unjudged:
        print(
            f"codegym-data: error: the sandbox could not judge {len(unjudged)} rewrites (they are not kept); "
            f"the first: {unjudged[0].error}",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``codegym-data``."""
    from codegym_evaluator.servers import ServerError
    from codegym_evaluator.tasks import DatasetError

    from .transform import UnknownTransformation

    parser = argparse.ArgumentParser(
        prog="codegym-data",
        description="Data tools on codegym's task library.",
        epilog="codegym-data transform --help: the options of transform.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_transform(sub)
    add_mask_parser(sub)
    tester_cli.add_parser(sub)
    synthesize_cli.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (DatasetError, ServerError, UnknownTransformation) as exc:
        print(f"codegym-data: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("codegym-data: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
