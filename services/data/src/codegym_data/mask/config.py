"""Settings of ``codegym-data mask``: one pydantic model whose field descriptions are the ``--help``.

Every field is a flag (``--max-lines 8``) and an environment variable (``CODEGYM_DATA_MASK_MAX_LINES=8``);
flags win.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ..options import SandboxConcurrency, SandboxToken, SandboxUrls, SandboxWorkers, TaskSelection, TestTimeout
from .dataset import parse_metric_values
from .fim import FimFormat, parse_tokens


class MaskConfig(TaskSelection):
    """One masking run: which rows, how spans are chosen, how rows are written, where fills are judged."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_DATA_MASK_")

    metrics: str = Field(
        "cyclomatic,halstead_volume",
        description="Metrics that weigh the choice of span, comma-separated, each name or name=weight: "
        "cyclomatic, halstead_volume, nesting_depth, lines, statements.",
    )
    minimum: str = Field(
        "",
        description="Thresholds a span must reach to be a candidate, comma-separated "
        "name=value (cyclomatic=2: only spans with a decision).",
    )
    max_lines: int | None = Field(None, ge=1, description="Spans longer than this many lines are not candidates.")
    probability: float = Field(0.5, ge=0.0, le=1.0, description="Chance that a function gets a masked span.")
    spans_per_function: int = Field(1, ge=1, description="Spans masked in a function that gets any (one row each).")
    seed: int = Field(
        0,
        description="Seed of the draws; a function's draws depend only on the seed, the row's id "
        "and the function's name.",
    )
    require_tested: bool = Field(
        True,
        description="Drop rows whose tests still pass with the span replaced by "
        "'pass' (the tests cannot judge a fill of them).",
    )
    fim_format: FimFormat = Field(
        "fields",
        description="fields: prefix, middle, suffix as JSON fields; psm: also prompt, completion and text in the "
        "<fim_prefix>/<fim_suffix>/<fim_middle> style.",
    )
    fim_tokens: str = Field(
        "<fim_prefix>,<fim_suffix>,<fim_middle>",
        description="The prefix, suffix and middle tokens of --fim-format psm, comma-separated.",
    )
    out: Path = Field(
        Path("codegym-data-mask"), description="Directory for masked.jsonl, report.md, report.json and dropped.jsonl."
    )
    sandbox_url: SandboxUrls
    sandbox_token: SandboxToken = None
    sandbox_workers: SandboxWorkers = 0
    concurrency: SandboxConcurrency = 8
    timeout_per_test: TestTimeout = 5.0

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
