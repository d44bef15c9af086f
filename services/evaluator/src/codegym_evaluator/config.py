"""What one evaluation run does; the CLI's flags and the service's job body are made from these fields."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from .tasks.model import PUBLIC_TESTS

# Credentials: never written into a report or a summary, and filled from the environment only by the CLI, for its
# own user (a service running jobs for others lends none of its process's credentials).
SECRETS = {"api_key": "OPENAI_API_KEY", "sandbox_token": "CODEGYM_SANDBOX_API_TOKEN"}


def opt(default: Any, help: str, **extra: Any) -> Any:
    """A dataclass field that carries its help text (and choices) for the CLI and the docs."""
    return field(default=default, metadata={"help": help, **extra})


@dataclass
class RunConfig:
    """One evaluation: which tasks, where completions come from, how they are judged, where results go."""

    dataset: str = opt(
        "humaneval",
        "dataset name: humaneval, mbpp, mbpp-sanitized, apps, code_contests, "
        "livecodebench, taco, leetcode, or jsonl (codegym's task format, with --path); read from "
        "the hub, or from a copy laid out as the hub under $CODEGYM_HUB_ROOT",
    )
    path: str | None = opt(None, "local file or directory with the dataset's rows (offline clusters)")
    split: str | None = opt(
        None,
        "dataset split (default: the dataset's test split); for livecodebench a "
        "version: release_latest (default), release_vN, vN or vN_vM",
    )
    limit: int | None = opt(None, "evaluate only the first N tasks")
    difficulty: str | None = opt(
        None,
        "only tasks of this difficulty (APPS: introductory, interview, competition; "
        "TACO: EASY to VERY_HARD; LeetCode: Easy, Medium, Hard)",
    )
    samples: str | None = opt(None, "JSONL of {task_id, completion} to judge instead of asking a model")
    base_url: str | None = opt(
        None,
        "OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (vLLM); without it and --samples, "
        "a llama.cpp server on SmolLM2-135M starts on loopback",
    )
    model: str | None = opt(None, "model name sent to the endpoint (default: the first the endpoint lists)")
    api_key: str | None = opt(None, "API key for the endpoint (or OPENAI_API_KEY)")
    api: str = opt(
        "chat",
        "chat (messages, a fenced answer) or completion (a base model continues the prompt)",
        choices=["chat", "completion"],
    )
    n: int = opt(1, "samples per task")
    temperature: float = opt(0.0, "sampling temperature (use > 0 with n > 1)")
    top_p: float = opt(1.0, "nucleus sampling")
    max_tokens: int = opt(512, "largest completion in tokens")
    model_concurrency: int = opt(4, "model requests in flight")
    model_retries: int = opt(3, "retries of a failed model request (exponential backoff)")
    k: list[int] = field(default_factory=lambda: [1], metadata={"help": "k of pass@k (several allowed)"})
    sandbox_url: list[str] = field(
        default_factory=list,
        metadata={"help": "sandbox server URL(s); without one a local sandbox starts on loopback"},
    )
    sandbox_token: str | None = opt(None, "bearer token of the sandbox (or CODEGYM_SANDBOX_API_TOKEN)")
    sandbox_workers: int = opt(0, "workers of the local sandbox started when no URL is given (0: one per core)")
    concurrency: int = opt(8, "sandbox requests in flight")
    retries: int = opt(3, "retries of a failed sandbox request")
    timeout_per_test: float = opt(5.0, "time limit of one test in seconds")
    extract: str = opt(
        "last",
        "which fenced block is the program: first, last, or none (the completion as is)",
        choices=["first", "last", "none"],
    )
    turns: int = opt(
        1,
        "answers per sample: after a wrong one the model reads feedback on the task's public tests and answers "
        "again, up to this many times; pass@1 is reported after each turn (needs a model and --api chat)",
    )
    public_tests: int = opt(
        PUBLIC_TESTS,
        "for tasks without public tests (HumanEval, APPS, TACO, LeetCode): feedback shows the first N of the "
        "tests that judge the answer, always leaving one hidden (Task.visible_tests)",
        aliases=["--feedback-tests"],  # its name before every front door shared one
    )
    output: str = opt("codegym-eval-out", "directory for results.jsonl, summary.json and the report")

    def problem(self) -> str | None:
        """Why these settings cannot make a run, or None."""
        if self.n < 1 or any(k < 1 for k in self.k):
            return "--n and -k must be at least 1"
        if self.turns < 1:
            return "--turns must be at least 1"
        if self.public_tests < 0:
            return "--public-tests must be at least 0"
        if self.turns > 1 and self.samples is not None:
            return (
                "--turns needs a model to answer the feedback: a --samples file holds only first answers "
                "(give --base-url, or nothing for the embedded model, instead of --samples)"
            )
        if self.turns > 1 and self.api != "chat":
            return "--turns needs --api chat: the feedback is a user message of the chat"
        return None

    def shown(self) -> dict[str, Any]:
        """The settings as a report shows them: every field but the credentials."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in SECRETS}

    def with_environment_credentials(self) -> None:
        """Fill the credentials not given from the environment (``OPENAI_API_KEY``,
        ``CODEGYM_SANDBOX_API_TOKEN``): what the CLI does for the user who runs it."""
        for name, variable in SECRETS.items():
            if getattr(self, name) is None:
                setattr(self, name, os.environ.get(variable) or None)

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run it resumes."""
        return {
            "dataset": self.dataset,
            "path": self.path,
            "split": self.split,
            "difficulty": self.difficulty,
            "samples": self.samples,
            "model": self.model,
            "api": self.api,
            "extract": self.extract,
            "public_tests": self.public_tests,
        }
