"""What bench/learning_curve.py's tasks share: a seed's trainer settings, the sandbox, HumanEval on one model,
and a base model's evaluation read back from an earlier run."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codegym_evaluator.servers import sandbox_server
from codegym_evaluator.tasks import Task
from codegym_trainer.config import TrainConfig
from codegym_trainer.evaluation import EvalPoint, HeldOutEvaluator
from codegym_trainer.platform import detect
from codegym_trainer.policy_loading import load_model, load_tokenizer, resolve_source
from codegym_trainer.sandbox import scorer_factory
from tqdm import tqdm


def humaneval_point(
    model_path: str, tasks: list[Task], config: TrainConfig, urls: list[str], out: Path, step: int
) -> EvalPoint:
    """HumanEval on one model (the base or a seed's final one, sampled with ``config.seed``), answers under ``out``."""
    platform = detect(config, probe_hub=False)
    source = resolve_source(model_path)
    tokenizer = load_tokenizer(source, offline=platform.offline)
    model = load_model(source, offline=platform.offline)
    if platform.kind != "cpu":
        import torch

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(platform.precision, torch.float32)
        model = model.to("cuda", dtype=dtype)
    evaluator = HeldOutEvaluator.for_run(config, tasks, tokenizer, lambda: scorer_factory(config, urls), out)
    with tqdm(total=len(tasks), desc=f"HumanEval {model_path}", unit="problem", file=sys.stderr) as bar:
        return evaluator(model, step, on_batch=bar.update)


def humaneval_config(args: argparse.Namespace, config: TrainConfig) -> TrainConfig:
    """A run's settings for its HumanEval evaluations: HumanEval's number of samples, not the held-out set's."""
    return config.model_copy(update={"eval_samples": args.humaneval_samples})


def base_config(args: argparse.Namespace, out: Path, seed: int, url: str) -> TrainConfig:
    return TrainConfig(
        model=args.model,
        dataset=args.dataset,
        train_steps=args.steps,
        batch_size=args.batch_size,
        group_size=args.group_size,
        max_completion_length=args.max_completion_length,
        learning_rate=args.lr,
        seed=seed,
        eval_limit=args.heldout_limit,
        eval_interval=args.eval_interval,
        eval_samples=args.eval_samples,
        eval_max_new_tokens=args.max_new_tokens,
        eval_batch_size=args.eval_batch_size,
        vllm_mode=args.vllm_mode,
        save_steps=10_000,
        completions_interval=max(1, args.steps),
        sandbox_url=[url],
        output_dir=out / f"seed_{seed}",
        progress=False,
    )


def load_point(path: Path, key: dict[str, Any]) -> EvalPoint | None:
    """The base model's evaluation from an earlier run of the same command (``key`` holds what it depends on)."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.pop("key", None) != key:
        return None
    for field_name in ("interval", "sampled_interval"):
        if data.get(field_name) is not None:
            data[field_name] = tuple(data[field_name])
    return EvalPoint(**data)


@contextlib.contextmanager
def sandbox(args: argparse.Namespace) -> Iterator[str]:
    """The URL of the sandbox given, or of a local one started for the whole run."""
    if args.sandbox_url:
        yield args.sandbox_url
        return
    with sandbox_server(workers=args.sandbox_workers) as server:
        yield server.url
