"""Settings of ``codegym-data transform``: one pydantic model whose field descriptions are the ``--help``.

Every field is a flag (``--timeout-per-test 3``) and an environment variable (``CODEGYM_DATA_TIMEOUT_PER_TEST=3``);
flags win.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from .options import SandboxConcurrency, SandboxToken, SandboxUrls, SandboxWorkers, TaskSelection, TestTimeout


class TransformConfig(TaskSelection):
    """One transformation run: which rows, which transformations, where they are judged, where results go."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_DATA_")

    transform: str = Field(
        "all",
        description="Comma-separated transformations, each applied to every row on its own; a+b applies a then "
        "b as one; all: every transformation on its own. --list shows them.",
    )
    seed: int = Field(
        0,
        description="Seed of the random choices (names, places); each row's draws depend only on "
        "the seed, the transformation and the row's id.",
    )
    out: Path = Field(
        Path("codegym-data-out"), description="Directory for tasks.jsonl, report.md, report.json and dropped.jsonl."
    )
    include_original: bool = Field(
        False, description="Write the original rows into tasks.jsonl too, before the transformed ones."
    )
    sandbox_url: SandboxUrls
    sandbox_token: SandboxToken = None
    sandbox_workers: SandboxWorkers = 0
    concurrency: SandboxConcurrency = 8
    timeout_per_test: TestTimeout = 5.0
