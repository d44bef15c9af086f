"""``codegym-eval``: evaluate a model or a samples file on a dataset, or serve evaluations over HTTP."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
import types
import typing
from collections.abc import Sequence

from .config import RunConfig
from .model_client import ModelError
from .report import summary_table, write_report
from .runner import run_evaluation
from .servers import SMOLLM2_ALIAS, ServerError, llama_server, sandbox_server
from .tasks.sources import DatasetError

EPILOG = """examples:
  codegym-eval run --dataset humaneval --samples samples.jsonl --output out/
  codegym-eval run --dataset mbpp --path mbpp.jsonl --base-url http://127.0.0.1:8000/v1 --n 10 --temperature 0.8 -k 1 10
  codegym-eval run --dataset humaneval --limit 5          # a llama.cpp server on SmolLM2-135M, on loopback
  codegym-eval serve --port 8090 --sandbox-url http://127.0.0.1:8080

Without --sandbox-url a local sandbox server starts on loopback for the run and stops at its end.
A re-run with the same --output resumes: finished samples are skipped."""


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    hints = typing.get_type_hints(RunConfig)
    for f in dataclasses.fields(RunConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        args = typing.get_args(kind)
        origin = typing.get_origin(kind)
        base = (
            next((a for a in args if a is not type(None)), kind) if origin in (typing.Union, types.UnionType) else kind
        )
        help_text = f.metadata.get("help", "")
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if default not in (None, [], ""):
            help_text += f" (default: {' '.join(map(str, default)) if isinstance(default, list) else default})"
        names = [flag, "-k"] if f.name == "k" else [flag, *f.metadata.get("aliases", ())]
        if typing.get_origin(base) is list:
            (item,) = typing.get_args(base)
            parser.add_argument(*names, type=item, nargs="+", default=default, help=help_text)
        else:
            parser.add_argument(*names, type=base, default=default, choices=f.metadata.get("choices"), help=help_text)


def _config(args: argparse.Namespace) -> RunConfig:
    return RunConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig)})


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]

    config = _config(args)
    config.with_environment_credentials()
    if (problem := config.problem()) is not None:
        raise DatasetError(problem)
    with contextlib.ExitStack() as stack:
        if not config.sandbox_url:
            sandbox = stack.enter_context(sandbox_server(config.sandbox_workers))
            print(f"codegym-eval: started a local sandbox at {sandbox.url}", file=sys.stderr)
            config.sandbox_url = [sandbox.url]
        if config.samples is None and config.base_url is None:
            print("codegym-eval: no --base-url: starting llama.cpp's server on SmolLM2-135M-Instruct", file=sys.stderr)
            llama = stack.enter_context(llama_server())
            print(f"codegym-eval: started llama.cpp's server at {llama.url}", file=sys.stderr)
            config.base_url, config.model = f"{llama.url}/v1", config.model or SMOLLM2_ALIAS
        bar = stack.enter_context(tqdm(total=0, unit="sample", desc="evaluating", file=sys.stderr))

        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        outcome = asyncio.run(run_evaluation(config, progress=progress))
    report = write_report(config.output, outcome.summary, config.shown(), outcome.error, outcome.turns)
    print(summary_table(outcome.summary, f"codegym-eval: {config.dataset}", outcome.turns))
    print(f"results: {config.output}/results.jsonl, summary: {config.output}/summary.json, report: {report}")
    if outcome.error:
        print(f"codegym-eval: error: the run stopped early: {outcome.error}", file=sys.stderr)
        print("codegym-eval: the results so far are kept; run again with the same --output to resume", file=sys.stderr)
        return 1
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn
    from pydantic import ValidationError

    from .service.app import create_app
    from .service.settings import EvaluatorSettings

    overrides = {
        "host": args.host,
        "port": args.port,
        "sandbox_url": args.sandbox_url,
        "data_dir": args.data_dir,
        "input_dir": args.input_dir,
        "model_urls": args.model_url,
        "job_sandbox_urls": args.job_sandbox_url,
    }
    try:
        settings = EvaluatorSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        print(f"codegym-eval: bad settings:\n{exc}", file=sys.stderr)
        return 2
    # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told not to: a client is where it connects from.
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info", proxy_headers=False)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="codegym-eval",
        description="Evaluate code generation on a dataset: completions from a samples file or an "
        "OpenAI-compatible model, judged by the codegym sandbox; pass@k, results per sample and a report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="evaluate once and write results, summary and report",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_config_flags(run)
    run.set_defaults(func=_run)
    serve = sub.add_parser("serve", help="serve evaluation jobs over HTTP (start a job, poll it, fetch its results)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1; others need CODEGYM_EVALUATOR_API_TOKEN)")
    serve.add_argument("--port", type=int, help="port (default 8090)")
    serve.add_argument("--sandbox-url", nargs="+", help="sandbox URL(s) for jobs that name none")
    serve.add_argument("--data-dir", help="where jobs write their results (default ./codegym-eval-jobs)")
    serve.add_argument("--input-dir", help="the directory whose files jobs may name (path, samples); default: none")
    serve.add_argument(
        "--model-url", nargs="+", help="model endpoint roots a job's base_url must lie under (default: any)"
    )
    serve.add_argument(
        "--job-sandbox-url", nargs="+", help="other sandboxes jobs may name, never given the service's sandbox token"
    )
    serve.set_defaults(func=_serve)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (DatasetError, ServerError, ModelError) as exc:
        print(f"codegym-eval: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("codegym-eval: interrupted; run again with the same --output to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
