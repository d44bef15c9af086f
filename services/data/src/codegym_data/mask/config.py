"""Settings of ``codegym-data mask``: one pydantic model whose field descriptions are the ``--help``.

Every field is a flag (``--max-lines 8``) and an environment variable (``CODEGYM_DATA_MASK_MAX_LINES=8``);
flags win.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .dataset import parse_metric_values
from .fim import FimFormat, parse_tokens


class MaskConfig(BaseSettings):
    """One masking run: which rows, how spans are chosen, how rows are written, where fills are judged."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_DATA_MASK_", extra="forbid", validate_default=True)

    dataset: str = Field(
        "humaneval",
        description="Dataset of the task library: humaneval, mbpp, mbpp-sanitized, apps, code_contests, "
        "livecodebench, taco, leetcode, or jsonl (codegym's task format, with --path).",
    )
    path: str | None = Field(None, description="Local file or directory with the dataset's rows.")
    split: str | None = Field(None, description="Dataset split (default: the dataset's own).")
    limit: int | None = Field(None, ge=1, description="Only the first N rows.")
    difficulty: str | None = Field(None, description="Only rows of this difficulty.")
    metrics: str = Field(
        "cyclomatic,halstead_volume",
        description="Metrics that weigh the choice of span, comma-separated, each name or name=weight: "
        "cyclomatic, halstead_volume, nesting_depth, lines, statements.",
    )
    minimum: str = Field("", description="Thresholds a span must reach to be a candidate, comma-separated "
                         "name=value (cyclomatic=2: only spans with a decision).")  # fmt: skip
    max_lines: int | None = Field(None, ge=1, description="Spans longer than this many lines are not candidates.")
    probability: float = Field(0.5, ge=0.0, le=1.0, description="Chance that a function gets a masked span.")
    spans_per_function: int = Field(1, ge=1, description="Spans masked in a function that gets any (one row each).")
    seed: int = Field(0, description="Seed of the draws; a function's draws depend only on the seed, the row's id "
                      "and the function's name.")  # fmt: skip
    require_tested: bool = Field(True, description="Drop rows whose tests still pass with the span replaced by "
                                 "'pass' (the tests cannot judge a fill of them).")  # fmt: skip
    fim_format: FimFormat = Field(
        "fields",
        description="fields: prefix, middle, suffix as JSON fields; psm: also prompt, completion and text in the "
        "<fim_prefix>/<fim_suffix>/<fim_middle> style.",
    )
    fim_tokens: str = Field("<fim_prefix>,<fim_suffix>,<fim_middle>", description="The prefix, suffix and middle "
                            "tokens of --fim-format psm, comma-separated.")  # fmt: skip
    out: Path = Field(Path("codegym-data-mask"), description="Directory for masked.jsonl, report.md, report.json "
                      "and dropped.jsonl.")  # fmt: skip
    sandbox_url: list[str] = Field(
        default_factory=list,
        description="URL of a running codegym sandbox (several allowed). None: a local sandbox starts on "
        "loopback for the run and stops at its end.",
    )
    sandbox_token: str | None = Field(None, description="Bearer token of the sandbox API.")
    sandbox_workers: int = Field(0, ge=0, description="Workers of the local sandbox (0: one per CPU core).")
    concurrency: int = Field(8, ge=1, description="Sandbox requests in flight.")
    timeout_per_test: float = Field(5.0, gt=0, description="Time limit of one test, in seconds.")

    @field_validator("metrics", "minimum")
    @classmethod
    def _known_metrics(cls, value: str) -> str:
        # an unknown name or a bad number is a ValueError, which pydantic reports as a bad setting
        if any(weight < 0 for weight in parse_metric_values(value).values()):
            raise ValueError("weights and thresholds must not be negative")
        return value

    @field_validator("fim_tokens")
    @classmethod
    def _three_tokens(cls, value: str) -> str:
        parse_tokens(value)
        return value
