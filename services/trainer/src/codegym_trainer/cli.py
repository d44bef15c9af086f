"""``codegym-train``: the command line, generated from :class:`TrainConfig` so flags and YAML fields agree."""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from .config import ConfigError, TrainConfig, build_config, read_yaml

DESCRIPTION = """\
GRPO training of a code model with TRL, rewarded by running its programs against tests in the codegym
sandbox. With no arguments it trains the embedded SmolLM2-135M-Instruct on the trainer's own problems on
the CPU, with a local sandbox, evaluating pass@1 on held-out problems before and after.
"""

EPILOG = """\
Every flag is also a field of a YAML file given with --config (flags win), e.g.
  model: Qwen/Qwen2.5-Coder-0.5B-Instruct
  train_steps: 100
  sandbox_url: [http://127.0.0.1:8080]
and an environment variable CODEGYM_TRAINER_<FIELD>.
"""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _unwrap_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def build_parser() -> argparse.ArgumentParser:
    """The parser: ``--config`` plus one flag per configuration field, defaults shown from the model."""
    parser = argparse.ArgumentParser(
        prog="codegym-train",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, help="YAML file whose fields fill the configuration.")
    for name, field in TrainConfig.model_fields.items():
        annotation = _unwrap_optional(field.annotation)
        default = field.get_default(call_default_factory=True)
        shown = f" (default: {default})" if default not in (None, []) else ""
        help_text = (field.description or "").replace("%", "%%") + shown
        kwargs: dict[str, Any] = {"default": argparse.SUPPRESS, "help": help_text, "dest": name}
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(annotation) is Literal:
            kwargs["choices"] = list(typing.get_args(annotation))
        elif typing.get_origin(annotation) is list:
            kwargs["action"] = "append"
            kwargs["metavar"] = "URL"
        elif annotation in (int, float):
            kwargs["type"] = annotation
        elif annotation is Path:
            kwargs["type"] = Path
        parser.add_argument(_flag(name), **kwargs)
    return parser


def parse_config(argv: Sequence[str] | None = None) -> TrainConfig:
    """The configuration from a YAML file (``--config``) and the flags; raises ``ConfigError``."""
    args = vars(build_parser().parse_args(argv))
    config_path = args.pop("config", None)
    file_values = read_yaml(config_path) if config_path is not None else {}
    return build_config(file_values, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``codegym-train``."""
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        print(f"codegym-train: {exc}", file=sys.stderr)
        return 2
    from .platform import end_process_group
    from .run import run  # torch and TRL load only once the configuration is known to be good

    try:
        run(config)
    except ConfigError as exc:
        print(f"codegym-train: {exc}", file=sys.stderr)
        return 2
    end_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
