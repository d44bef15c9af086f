"""``codegym-data synthesize``: its flags (made from ``SynthesizeConfig``), the servers it starts, its output."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from typing import Any

from ..options import add_command, add_settings_flags, progress_bars, run_with_settings, sandbox_urls
from .config import SynthesizeConfig

DESCRIPTION = """\
Generate new problems, reference solutions and assert tests with a model behind any OpenAI-compatible endpoint,
then test the tests in the codegym sandbox: the reference must pass all of them, functions that return None or
their first argument must not, and the tests must kill a share of the reference's mutants (flipped comparisons,
off-by-one constants, swapped operators, negated conditions, constant returns, deleted statements). Duplicate
and trivial problems are removed. Writes the kept problems as a codegym task file, which codegym-eval and
codegym-train read with --dataset jsonl, and a report with every rejection counted by reason.
"""

EPILOG = """\
examples:
  codegym-data synthesize --count 20 --out synth/          # llama.cpp's server on SmolLM2-135M, on loopback
  codegym-data synthesize --model-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-7B-Instruct \\
      --count 500 --concurrency 16 --seed 1 --out synth/
  codegym-data synthesize --model-url http://127.0.0.1:8000/v1 --seed-dataset humaneval --min-tests 5 \\
      --mutants 20 --min-mutation-score 0.9 --sandbox-url http://127.0.0.1:8080 --out synth/
  codegym-eval run --dataset jsonl --path synth/tasks.jsonl --base-url http://127.0.0.1:8000/v1

Output (--out DIR): tasks.jsonl (the kept problems, ids synth/<function>-<hash>, assert tests, the reference in
metadata.canonical_solution), report.md and report.json (candidates kept and rejected per reason, mutation
scores, kills per mutation operator), rejected.jsonl (every rejected candidate with its reason and the model's
answer). Exit status 1 when a model request or a sandbox judgement failed for good (its candidates are counted
as model_error or sandbox_error); 2 for bad settings or a server that did not start.
Every flag is also an environment variable CODEGYM_DATA_SYNTHESIZE_<FIELD>.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``synthesize`` to the subcommands ``sub`` of ``codegym-data``: a flag for each field of
    ``SynthesizeConfig``, with its description as help."""
    parser = add_command(
        sub,
        "synthesize",
        help="generate problems, solutions and tests with a model, keep those whose tests pass the test of tests",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    # unlike transform and mask, synthesize's help shows zero defaults (--seed, --sandbox-workers)
    add_settings_flags(parser, SynthesizeConfig, hidden_defaults=(None, []))
    parser.set_defaults(func=_synthesize)
    return parser


def _synthesize(args: argparse.Namespace) -> int:
    return run_with_settings(SynthesizeConfig, args, run_synthesize)


def run_synthesize(config: SynthesizeConfig) -> int:
    """Start what is not given (sandbox, model server), synthesize, write the output; the table on stdout."""
    from codegym_evaluator.model_client import ModelClient, ModelError
    from codegym_evaluator.scoring import Scorer
    from codegym_evaluator.servers import SMOLLM2_ALIAS, llama_server
    from codegym_evaluator.tasks import load_tasks

    from .pipeline import SynthesisRun, synthesize

    seeds = load_tasks(config.seed_dataset, path=config.seed_path) if config.seed_dataset else []
    with contextlib.ExitStack() as stack:
        sandboxes = stack.enter_context(sandbox_urls(config.sandbox_url, config.sandbox_workers))
        model_url, model_name = config.model_url, config.model
        if model_url is None:
            print("codegym-data: no --model-url: starting llama.cpp's server on SmolLM2-135M-Instruct", file=sys.stderr)
            llama = stack.enter_context(llama_server())
            print(f"codegym-data: started llama.cpp's server at {llama.url}", file=sys.stderr)
            model_url, model_name = f"{llama.url}/v1", model_name or SMOLLM2_ALIAS
        progress = progress_bars(stack, lambda stage: "candidate")

        async def go() -> SynthesisRun:
            api_key = config.api_key or os.environ.get("OPENAI_API_KEY")
            async with (
                ModelClient(
                    model_url,
                    model_name or "",
                    api_key=api_key,
                    concurrency=config.concurrency,
                    retries=config.model_retries,
                ) as model,
                Scorer(
                    sandboxes,
                    token=config.sandbox_token,
                    concurrency=config.sandbox_concurrency,
                    timeout_per_test=config.timeout_per_test,
                ) as scorer,
            ):
                if not model.model:
                    try:
                        listed = await model.models()
                    except ModelError as exc:
                        raise ModelError(f"could not list the models of {model_url} ({exc}); pass --model") from None
                    if not listed:
                        raise ModelError(f"{model_url} lists no model; pass --model")
                    model.model = listed[0]
                return await synthesize(config, model, scorer, seeds=seeds, progress=progress)

        try:
            run = asyncio.run(go())
        except ModelError as exc:
            print(f"codegym-data: error: {exc}", file=sys.stderr)
            return 2
    paths = run.write(config.out)
    print(run.report.table())
    print(
        f"\n{len(run.tasks)} problems in {paths['tasks.jsonl']}; report: {paths['report.md']}; "
        f"rejected: {paths['rejected.jsonl']}"
    )
    failed = [o for o in run.rejected if o.reason in ("model_error", "sandbox_error")]
    if failed:
        print(
            f"codegym-data: error: {len(failed)} candidates could not be generated or judged ({failed[0].reason}); "
            f"the first: {failed[0].detail}",
            file=sys.stderr,
        )
        return 1
    return 0
