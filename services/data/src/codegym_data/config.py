"""Settings of ``codegym-data transform``: one pydantic model whose field descriptions are the ``--help``.

Every field is a flag (``--timeout-per-test 3``) and an environment variable (``CODEGYM_DATA_TIMEOUT_PER_TEST=3``);
flags win.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TransformConfig(BaseSettings):
    """One transformation run: which rows, which transformations, where they are judged, where results go."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_DATA_", extra="forbid", validate_default=True)

    dataset: str = Field(
        "humaneval",
        description="Dataset of the task library: humaneval, mbpp, mbpp-sanitized, apps, code_contests, "
        "livecodebench, taco, leetcode, or jsonl (codegym's task format, with --path).",
    )
    path: str | None = Field(None, description="Local file or directory with the dataset's rows.")
    split: str | None = Field(None, description="Dataset split (default: the dataset's own).")
    limit: int | None = Field(None, ge=1, description="Only the first N rows.")
    difficulty: str | None = Field(None, description="Only rows of this difficulty.")
    transform: str = Field(
        "all",
        description="Comma-separated transformations, each applied to every row on its own; a+b applies a then "
        "b as one; all: every transformation on its own. --list shows them.",
    )
    seed: int = Field(0, description="Seed of the random choices (names, places); each row's draws depend only on "
                      "the seed, the transformation and the row's id.")  # fmt: skip
    out: Path = Field(Path("codegym-data-out"), description="Directory for tasks.jsonl, report.md, report.json "
                      "and dropped.jsonl.")  # fmt: skip
    include_original: bool = Field(False, description="Write the original rows into tasks.jsonl too, before the "
                                   "transformed ones.")  # fmt: skip
    sandbox_url: list[str] = Field(
        default_factory=list,
        description="URL of a running codegym sandbox (several allowed). None: a local sandbox starts on "
        "loopback for the run and stops at its end.",
    )
    sandbox_token: str | None = Field(None, description="Bearer token of the sandbox API.")
    sandbox_workers: int = Field(0, ge=0, description="Workers of the local sandbox (0: one per CPU core).")
    concurrency: int = Field(8, ge=1, description="Sandbox requests in flight.")
    timeout_per_test: float = Field(5.0, gt=0, description="Time limit of one test, in seconds.")
