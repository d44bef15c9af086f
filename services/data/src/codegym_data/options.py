"""What the subcommands of ``codegym-data`` share: settings models whose fields are both flags and environment
variables, the fields several commands have, and running with a given or a local sandbox.

A command's settings are a ``CommandSettings`` subclass with its own ``env_prefix``. ``add_settings_flags``
makes a flag of each field, with the field's description as help; ``run_with_settings`` builds the settings from
the flags given (the environment and the defaults fill the rest, so flags win) and runs the command.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class CommandSettings(BaseSettings):
    """Settings of one subcommand. Unknown fields are errors and defaults are validated too; each subclass sets
    its own ``env_prefix``, so that two commands' fields of the same name never read each other's variables."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True)


class TaskSelection(CommandSettings):
    """The rows of the task library a command reads; a subclass's own fields follow these in ``--help``."""

    dataset: str = Field(
        "humaneval",
        description="Dataset of the task library: humaneval, mbpp, mbpp-sanitized, apps, code_contests, "
        "livecodebench, taco, leetcode, or jsonl (codegym's task format, with --path).",
    )
    path: str | None = Field(None, description="Local file or directory with the dataset's rows.")
    split: str | None = Field(None, description="Dataset split (default: the dataset's own).")
    limit: int | None = Field(None, ge=1, description="Only the first N rows.")
    difficulty: str | None = Field(None, description="Only rows of this difficulty.")


# The sandbox fields come after each command's own fields in its --help, where a base class cannot put them, so
# they are shared as annotated types: ``sandbox_url: SandboxUrls``, ``sandbox_workers: SandboxWorkers = 0``.
SandboxUrls = Annotated[
    list[str],
    Field(
        default_factory=list,
        description="URL of a running codegym sandbox (several allowed). None: a local sandbox starts on "
        "loopback for the run and stops at its end.",
    ),
]
SandboxToken = Annotated[str | None, Field(description="Bearer token of the sandbox API.")]
SandboxWorkers = Annotated[int, Field(ge=0, description="Workers of the local sandbox (0: one per CPU core).")]
SandboxConcurrency = Annotated[int, Field(ge=1, description="Sandbox requests in flight.")]
TestTimeout = Annotated[float, Field(gt=0, description="Time limit of one test, in seconds.")]

SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def add_command(sub: Any, name: str, *, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` to the subparsers ``sub``; its description and epilog keep their own line
    breaks (they hold examples and lists)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return parser


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def add_settings_flags(
    parser: argparse.ArgumentParser,
    settings: type[BaseSettings],
    *,
    hidden_defaults: tuple[object, ...] = (None, [], False, ""),
) -> None:
    """A flag for each field of ``settings`` (``--max-lines`` for ``max_lines``): its description and default
    as help, ``--x/--no-x`` for a bool, one or more values for a list, the choices of a Literal, and int, float
    and Path values converted. Defaults equal to one of ``hidden_defaults`` are not shown; the comparison is
    ``==``, so ``False`` hides 0 and 0.0 too."""
    for name, field in settings.model_fields.items():
        annotation = _unwrap_optional(field.annotation)
        default = field.get_default(call_default_factory=True)
        shown = f" (default: {default})" if default not in hidden_defaults else ""
        # Unset flags stay unset (SUPPRESS), so that the environment can fill them before the defaults do.
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "help": (field.description or "") + shown}
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(annotation) is list:
            # the only list settings are sandbox URLs
            kwargs.update(action="extend", nargs="+", metavar="URL")
        elif typing.get_origin(annotation) is typing.Literal:
            kwargs["choices"] = typing.get_args(annotation)
        elif annotation in (int, float, Path):
            kwargs["type"] = annotation
        parser.add_argument("--" + name.replace("_", "-"), dest=name, **kwargs)


def run_with_settings(settings: type[SettingsT], args: argparse.Namespace, run: Callable[[SettingsT], int]) -> int:
    """``run`` on ``settings`` made from the flags in ``args`` that are its fields; exit status 2, with every
    invalid setting on stderr, when they do not validate."""
    values = {k: v for k, v in vars(args).items() if k in settings.model_fields}
    try:
        config = settings(**values)
    except ValidationError as exc:
        problems = "\n".join(f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"codegym-data: invalid settings:\n{problems}", file=sys.stderr)
        return 2
    return run(config)


@contextlib.contextmanager
def sandbox_urls(urls: Sequence[str], workers: int) -> Iterator[list[str]]:
    """The sandboxes a run sends its programs to: ``urls`` when there are any, else a local sandbox with
    ``workers`` workers, started on loopback for the run and stopped at its end."""
    if urls:
        yield list(urls)
        return
    from codegym_evaluator.servers import sandbox_server

    with sandbox_server(workers) as sandbox:
        print(f"codegym-data: started a local sandbox at {sandbox.url}", file=sys.stderr)
        yield [sandbox.url]


def progress_bars(stack: contextlib.ExitStack, unit: Callable[[str], str]) -> Progress:
    """A progress callback that draws a bar on stderr for each stage, counting ``unit(stage)``; a bar closes when
    its stage is done, or else when ``stack`` closes."""
    from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]

    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = tqdm(total=total, desc=stage, unit=unit(stage), file=sys.stderr)
            stack.callback(bars[stage].close)
        bar = bars[stage]
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return progress
