"""Service settings, read from ``CODEGYM_EVALUATOR_*`` environment variables."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class EvaluatorSettings(BaseSettings):
    """The evaluator service's configuration."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_EVALUATOR_", env_nested_delimiter="__", extra="forbid")

    host: str = Field("127.0.0.1", description="Address to bind.")
    port: int = Field(8090, description="Port to bind.")
    sandbox_url: list[str] = Field(default_factory=list, description="Sandbox URL(s) for jobs that name none.")
    sandbox_token: SecretStr | None = Field(
        None, description="Bearer token of the sandbox: sent only to SANDBOX_URL, never to a sandbox a job names."
    )
    job_sandbox_urls: list[str] = Field(
        default_factory=list,
        description="Other sandboxes a job may name (with its own sandbox_token, or none); '*': any.",
    )
    model_urls: list[str] | None = Field(
        None,
        description="Model endpoint roots a job's base_url must lie under; unset: any endpoint.",
    )
    input_dir: str | None = Field(
        None,
        description="Directory of the files jobs may read (path, samples); unset: jobs name no file of the host.",
    )
    data_dir: str = Field("codegym-eval-jobs", description="Directory where each job writes its results.")
    max_jobs: int = Field(2, ge=1, description="Jobs that run at once; more wait their turn.")
    api_token: SecretStr | None = Field(None, description="Bearer token required on the API when set.")

    @model_validator(mode="after")
    def _token_off_loopback(self) -> EvaluatorSettings:
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback and self.api_token is None:
            raise ValueError(f"binding {self.host} (not loopback) needs CODEGYM_EVALUATOR_API_TOKEN")
        return self


@lru_cache
def get_settings() -> EvaluatorSettings:
    return EvaluatorSettings()
