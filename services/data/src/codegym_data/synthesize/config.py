"""Settings of ``codegym-data synthesize``: one pydantic model whose field descriptions are the ``--help``.

Every field is a flag (``--min-tests 4``) and an environment variable (``CODEGYM_DATA_SYNTHESIZE_MIN_TESTS=4``);
flags win. The prefix is the command's own: ``--concurrency`` here counts model requests, not sandbox ones as
in ``transform``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ..options import CommandSettings, SandboxConcurrency, SandboxToken, SandboxUrls, SandboxWorkers


class SynthesizeConfig(CommandSettings):
    """One synthesis run: the model, how many candidates, the test-of-tests thresholds, the sandbox, the output."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_DATA_SYNTHESIZE_")

    model_url: str | None = Field(
        None,
        description="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (vLLM, llama.cpp). None: "
        "llama.cpp's server on SmolLM2-135M-Instruct starts on loopback for the run.",
    )
    model: str | None = Field(None, description="Model name sent to the endpoint (default: the first it lists).")
    api_key: str | None = Field(None, description="API key of the endpoint (default: $OPENAI_API_KEY).")
    count: int = Field(
        20, ge=1, description="Candidates to generate (one model request each); at most this many problems are kept."
    )
    seed: int = Field(
        0,
        description="Seed of the topics, of the sampling seeds sent to the model and of the "
        "mutants; candidate i's draws depend only on the seed and i.",
    )
    temperature: float = Field(0.8, ge=0, description="Sampling temperature.")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling.")
    max_tokens: int = Field(600, ge=16, description="Largest answer in tokens.")
    concurrency: int = Field(2, ge=1, description="Model requests in flight.")
    model_retries: int = Field(3, ge=0, description="Retries of a failed model request (exponential backoff).")
    seed_dataset: str | None = Field(
        None,
        description="Dataset of the task library whose problems seed the topics, one shown per request (e.g. "
        "humaneval; jsonl with --seed-path). None: topics from a built-in list.",
    )
    seed_path: str | None = Field(None, description="Local file or directory to read --seed-dataset from.")
    min_tests: int = Field(3, ge=1, description="Fewest assert tests a kept problem has.")
    mutants: int = Field(10, ge=1, description="Mutants of each reference solution judged against its tests.")
    min_mutation_score: float = Field(
        0.8, ge=0, le=1, description="Smallest share of its mutants a kept problem's tests must kill."
    )
    max_problem_similarity: float = Field(
        0.85,
        gt=0,
        le=1,
        description="Problem statements at least this similar (difflib ratio of their words) to a kept one, or "
        "to the prompt's example or seed problem, are duplicates.",
    )
    out: Path = Field(
        Path("codegym-synth-out"), description="Directory for tasks.jsonl, report.md, report.json and rejected.jsonl."
    )
    sandbox_url: SandboxUrls
    sandbox_token: SandboxToken = None
    sandbox_workers: SandboxWorkers = 0
    sandbox_concurrency: SandboxConcurrency = 8
    timeout_per_test: float = Field(
        2.0,
        gt=0,
        description="Time limit of one test, in seconds (a mutant that loops forever costs this much per test).",
    )
