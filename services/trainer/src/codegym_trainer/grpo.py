"""TRL's GRPOTrainer driven through the trainer's seam, with the time of each step split into phases.

Each step's samples come from a rollout function and their advantages from an advantage function
(:mod:`codegym_trainer.rollout`); by default GRPO on code: TRL's generation, the sandbox reward and
group-normalised advantages. This module is the only one that knows TRL's internals: ``TRLContext`` gives
rollouts generation, scoring and the run's sandbox, and ``CodegymGRPOTrainer._generate_and_score_completions``
turns a rollout and its advantages into the batch TRL's loss reads. A TRL upgrade that moves those breaks here
alone (and in ``environments.py``, which readies TRL's environments for the seam as TRL's own method would).

The split of each step is logged (``time/generation``, ``time/scoring``, ``time/optimisation`` and
``time/scoring_share``: the share of the step spent waiting for rewards), and every ``completions_interval``
steps the completions table (prompt, completion, the rollout's extra columns, reward, advantage) is written
to ``<output_dir>/completions/step_NNNNN.jsonl`` (and to W&B when it is on).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import torch
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.utils import pad

from .environments import ready_environments
from .rollout import Generation, GroupAdvantage, Rollout, StepAdvantage, StepRollout, code_rollout, group_advantages
from .sandbox import RunSandbox

__all__ = ["CodegymGRPOTrainer", "StepTiming", "TRLContext", "group_advantages"]

T = TypeVar("T")


@dataclass
class StepTiming:
    """Seconds spent in each phase of the last optimisation step."""

    generation: float = 0.0
    scoring: float = 0.0
    total: float = 0.0
    history: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def optimisation(self) -> float:
        return max(self.total - self.generation - self.scoring, 0.0)

    @property
    def scoring_share(self) -> float:
        return self.scoring / self.total if self.total > 0 else 0.0


class TRLContext:
    """The :class:`~codegym_trainer.rollout.TrainerContext` of a ``CodegymGRPOTrainer``: TRL does the work."""

    def __init__(self, trainer: CodegymGRPOTrainer) -> None:
        self._trainer = trainer

    @property
    def step(self) -> int:
        return int(self._trainer.state.global_step)

    @property
    def group_size(self) -> int:
        return int(self._trainer.num_generations or 1)

    @property
    def process_index(self) -> int:
        return int(self._trainer.accelerator.process_index)

    @property
    def num_processes(self) -> int:
        return int(self._trainer.accelerator.num_processes)

    @property
    def tokenizer(self) -> Any:
        return self._trainer.processing_class

    @property
    def sandbox(self) -> RunSandbox:
        if self._trainer.sandbox is None:
            raise ValueError("this trainer was given no sandbox (CodegymGRPOTrainer(sandbox=...)) for its rollout")
        return self._trainer.sandbox

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        trainer = self._trainer
        start = time.perf_counter()
        group = trainer.num_generations
        # TRL's vLLM server path encodes every num_generations-th prompt once and samples that many answers
        trainer.num_generations = group if repeats is None else repeats
        try:
            prompt_ids, completion_ids, tool_mask, completions, logprobs, *_ = trainer._generate(list(prompts))
        finally:
            trainer.num_generations = group
            trainer._phase_generation += time.perf_counter() - start
        # TRL's tool loop marks the tool results it spliced into a completion with 0s: kept for the loss
        mask = [list(m) for m in tool_mask] if tool_mask is not None else None
        return Generation(list(prompt_ids), list(completion_ids), list(completions), logprobs, mask)

    def generate_ids(self, prompt_ids: Sequence[list[int]]) -> Generation:
        trainer: Any = self._trainer  # TRL's private generation and its processing class, untyped
        start = time.perf_counter()
        try:
            # TRL's own continuation after a tool result: its single-turn generation on raw token ids
            completion_ids, logprobs = trainer._generate_single_turn([list(p) for p in prompt_ids], None, {}, 1)
        finally:
            trainer._phase_generation += time.perf_counter() - start
        texts = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        chat = trainer.processing_class.chat_template is not None
        completions = [[{"role": "assistant", "content": t}] if chat else t for t in texts]
        return Generation([list(p) for p in prompt_ids], [list(c) for c in completion_ids], completions, logprobs)

    def score(
        self, inputs: Sequence[Mapping[str, Any]], prompts: Sequence[Any], generation: Generation
    ) -> dict[str, list[float | None]]:
        trainer = self._trainer
        start = time.perf_counter()
        try:
            # every process's rewards (TRL gathers them), rows in process order; every process scores as many
            everyone = trainer._calculate_rewards(
                [dict(row) for row in inputs], list(prompts), generation.completions, generation.completion_ids
            )
        finally:
            trainer._phase_scoring += time.perf_counter() - start
        n = len(prompts)
        mine = everyone[self.process_index * n : (self.process_index + 1) * n].cpu()
        return {
            name: [None if math.isnan(v) else float(v) for v in mine[:, i].tolist()]
            for i, name in enumerate(trainer.reward_func_names)
        }

    def gather(self, values: Sequence[T]) -> list[T]:
        if self.num_processes == 1:
            return list(values)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.num_processes
        dist.all_gather_object(parts, list(values))
        return [value for part in parts for value in part]

    def any_process(self, flag: bool) -> bool:
        if self.num_processes == 1:
            return flag
        accelerator = self._trainer.accelerator
        return bool(accelerator.gather(torch.tensor([int(flag)], device=accelerator.device)).sum().item() > 0)


class CodegymGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose samples and advantages come from ``step_rollout`` and ``step_advantage`` (the seam's
    functions; not TRL's own ``rollout_func``, which this trainer does not use); it times its phases and writes
    a completions table every N steps. ``sandbox``: the run's, which the seam gives rollouts that run programs."""

    def __init__(
        self,
        *args: Any,
        completions_interval: int = 5,
        step_rollout: StepRollout = code_rollout,
        step_advantage: StepAdvantage | None = None,
        sandbox: RunSandbox | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sandbox = sandbox
        self.completions_interval = completions_interval
        self.step_rollout = step_rollout
        self.step_advantage: StepAdvantage = step_advantage if step_advantage is not None else GroupAdvantage()
        self.context = TRLContext(self)
        self.timing = StepTiming()
        self._phase_generation = 0.0
        self._phase_scoring = 0.0
        self._table: list[dict[str, Any]] = []

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        # TRL calls this once per generation batch (once per optimisation step here): the seam's one entry
        if self.environment_factories is not None:
            # TRL's environments (--tools): reset with their rows first, as TRL's own method does
            inputs = ready_environments(self, inputs)
        rollout = self.step_rollout(self.context, inputs)
        if not len(rollout):
            raise ValueError("the rollout function returned no samples")
        advantages = self.step_advantage(rollout, self.context)
        if len(advantages) != len(rollout):
            raise ValueError(f"the advantage function returned {len(advantages)} advantages for {len(rollout)} samples")
        self._record(rollout, advantages)
        return self._loss_batch(rollout, advantages)

    def _loss_batch(self, rollout: Rollout, advantages: Sequence[float]) -> dict[str, Any]:
        """The tensors TRL's loss reads, from a rollout and its advantages."""
        device = self.accelerator.device
        training = self.model is not None and self.model.training
        args: Any = self.args  # a GRPOConfig, typed as transformers' TrainingArguments
        multiple: Any = self.pad_to_multiple_of
        prompt_ids, completion_ids = list(rollout.prompt_ids), list(rollout.completion_ids)
        logprobs = list(rollout.logprobs) if rollout.logprobs is not None else None
        own = list(rollout.completion_mask) if rollout.completion_mask is not None else None
        values = list(advantages)
        # TRL splits a step's samples into steps_per_generation equal micro-batches and drops a remainder;
        # a rollout whose size varies (self-play) is padded with copies that the loss mask leaves out
        chunks = args.steps_per_generation if training else 1
        padding = -len(rollout) % chunks
        prompt_ids += [prompt_ids[-1]] * padding
        completion_ids += [completion_ids[-1]] * padding
        if logprobs is not None:
            logprobs += [logprobs[-1]] * padding
        if own is not None:
            own += [own[-1]] * padding
        values += [0.0] * padding
        keep = torch.tensor([1] * len(rollout) + [0] * padding, device=device)

        def padded(rows: list[list[Any]], value: Any, side: str, dtype: torch.dtype | None = None) -> torch.Tensor:
            tensors = [torch.tensor(r, dtype=dtype) for r in rows]
            return pad(tensors, padding_value=value, padding_side=side, pad_to_multiple_of=multiple).to(device)

        pad_id = self._tokenizer.pad_token_id
        prompt_tensor = padded(prompt_ids, pad_id, "left")
        prompt_mask = padded([[1] * len(r) for r in prompt_ids], 0, "left")
        completion_tensor = padded(completion_ids, pad_id, "right")
        completion_mask = padded([[1] * len(r) for r in completion_ids], 0, "right") * keep.unsqueeze(1)
        if self.mask_truncated_completions:
            ends = [*self.eos_token_ids, pad_id]
            finished = torch.tensor([bool(ids) and ids[-1] in ends for ids in completion_ids], device=device)
            completion_mask = completion_mask * finished.unsqueeze(1).int()
        # the rollout's mask (feedback and tool tokens 0) goes to TRL's loss as its tool_mask, which the loss
        # multiplies into the completion mask; tokens are counted as TRL counts them, the policy's own only
        tool_mask = padded(own, 1, "right") if own is not None else None
        loss_mask = completion_mask if tool_mask is None else completion_mask * tool_mask
        num_items_in_batch = self.accelerator.gather(loss_mask.sum()).sum()

        input_ids = torch.cat([prompt_tensor, completion_tensor], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        logits_to_keep = completion_tensor.size(1)
        batch_size = args.per_device_train_batch_size if training else args.per_device_eval_batch_size
        sampling = (
            padded([[math.nan if x is None else x for x in r] for r in logprobs], 0.0, "right", torch.float32)
            if logprobs is not None
            else None
        )
        output: dict[str, Any] = {
            "prompt_ids": prompt_tensor,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_tensor,
            "completion_mask": completion_mask,
            "advantages": torch.tensor(values, dtype=torch.float32, device=device),
            "num_items_in_batch": num_items_in_batch,
        }
        if sampling is not None:
            output["sampling_per_token_logps"] = sampling
        if tool_mask is not None:
            output["tool_mask"] = tool_mask

        def logps(model: Any) -> torch.Tensor:
            result, _, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size
            )
            return cast(torch.Tensor, result)

        correct_sampling = self.use_vllm and self.vllm_importance_sampling_correction and sampling is not None
        with torch.no_grad(), disable_gradient_checkpointing(cast(Any, self.model), args.gradient_checkpointing_kwargs):
            # the policy that sampled differs from the one optimised when generation and optimisation steps
            # are out of line, or when vLLM sampled (TRL's rule)
            generate_every = args.steps_per_generation * self.num_iterations
            if args.gradient_accumulation_steps % generate_every != 0 or correct_sampling:
                output["old_per_token_logps"] = logps(self.model)
            if correct_sampling and sampling is not None:
                output["importance_sampling_ratio"] = self._sampling_ratio(
                    output["old_per_token_logps"], sampling, loss_mask
                )
            if self.beta != 0.0:
                if self.ref_model is None:
                    raise ValueError("a KL penalty (beta > 0) needs TRL's reference model; PEFT is not supported")
                output["ref_per_token_logps"] = logps(self.ref_model)
        return output

    def _sampling_ratio(self, old: torch.Tensor, sampling: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """vLLM's importance-sampling correction, in the mode and bounds of TRL's configuration."""
        mode = self.vllm_importance_sampling_mode
        diff = torch.nan_to_num((old - sampling) * mask, nan=0.0)  # unknown sampler logprobs: no correction
        if mode.startswith("sequence"):
            diff = diff.sum(dim=-1, keepdim=True)
        ratio = torch.exp(diff)
        low, high = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        if mode.endswith("truncate"):
            return torch.clamp(ratio, min=low, max=high)
        low = -math.inf if low is None else low
        high = math.inf if high is None else high
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)

    def _record(self, rollout: Rollout, advantages: Sequence[float]) -> None:
        """Log the step's rewards and the rollout's metrics, and keep its rows for the completions table."""
        metrics = self._metrics["train" if self.model is not None and self.model.training else "eval"]
        ctx = self.context
        rewards = ctx.gather(rollout.rewards)
        scored = torch.tensor([r for r in rewards if r is not None], dtype=torch.float64)
        # no scored reward (the sandbox gone) logs NaN, which the sinks write as null: masked, not a silent 0
        metrics["reward"].append(float(scored.mean()) if scored.numel() else math.nan)
        metrics["reward_std"].append(float(scored.std()) if scored.numel() > 1 else math.nan)
        parts = rollout.reward_parts or {"reward": rollout.rewards}
        everyone_parts = {name: ctx.gather(values) for name, values in sorted(parts.items())}
        if rollout.reward_parts:
            for name, values in everyone_parts.items():
                part = torch.tensor([v for v in values if v is not None], dtype=torch.float64)
                metrics[f"rewards/{name}/mean"].append(float(part.mean()) if part.numel() else math.nan)
                metrics[f"rewards/{name}/std"].append(float(part.std()) if part.numel() > 1 else 0.0)
        # what reward functions logged through TRL's log_metric and log_extra, besides the rollout's own
        pending_metrics: dict[str, list[float]] = {k: list(v) for k, v in self._pending_metrics.items()}
        pending_metrics.update({k: [v] for k, v in rollout.metrics.items()})
        self._pending_metrics.clear()
        for name in sorted(set(ctx.gather(list(pending_metrics)))):
            local = pending_metrics.get(name, [])
            shared = ctx.gather([(math.fsum(local), len(local))])
            count = sum(c for _, c in shared)
            if count:
                metrics[name].append(sum(t for t, _ in shared) / count)
        extra: dict[str, list[Any]] = {k: list(v) for k, v in self._pending_extra_logs.items()}
        extra.update(rollout.extra)
        self._pending_extra_logs.clear()
        columns = {
            name: ctx.gather(extra.get(name, [None] * len(rollout))) for name in sorted(set(ctx.gather(list(extra))))
        }
        everyone_advantages = ctx.gather(list(advantages))
        rows = []
        for i, (prompt, completion) in enumerate(
            zip(ctx.gather(rollout.prompts), ctx.gather(rollout.completions), strict=True)
        ):
            row: dict[str, Any] = {"prompt": prompt, "completion": completion}
            for name, values in columns.items():
                row[name] = values[i] if i < len(values) else None
            for name, values in everyone_parts.items():
                row["reward" if len(everyone_parts) == 1 else f"reward/{name}"] = values[i]
            row["advantage"] = everyone_advantages[i]
            rows.append(row)
        self._table = rows

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        # generation and scoring happen inside the first micro-step of an optimisation step
        start = time.perf_counter()
        loss: torch.Tensor = super().training_step(model, inputs, num_items_in_batch)  # type: ignore[no-untyped-call]
        self.timing.total += time.perf_counter() - start
        if self._step % self.current_gradient_accumulation_steps == 0:
            t = self.timing
            t.generation, t.scoring = self._phase_generation, self._phase_scoring
            t.history.append((t.generation, t.scoring, t.optimisation))
            metrics = self._metrics["train"]
            metrics["time/generation"].append(t.generation)
            metrics["time/scoring"].append(t.scoring)
            metrics["time/optimisation"].append(t.optimisation)
            metrics["time/scoring_share"].append(t.scoring_share)
            self._phase_generation = self._phase_scoring = 0.0
            self._last_total = t.total
            t.total = 0.0
        return loss

    @property
    def last_step_seconds(self) -> float:
        """Wall time of the last finished optimisation step."""
        return float(getattr(self, "_last_total", 0.0))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        training = self.model is not None and self.model.training
        step = self.state.global_step
        if training and step and step % self.completions_interval == 0 and self.accelerator.is_main_process:
            self._write_completions(step)
        super().log(logs, start_time)

    def _write_completions(self, step: int) -> None:
        rows = [{"step": step, **row} for row in self._table]
        out = Path(str(self.args.output_dir)) / "completions"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / f"step_{step:05d}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row, default=str) + "\n")
        if self.args.report_to and "wandb" in self.args.report_to:
            import wandb

            if wandb.run is not None and rows:
                columns = list(rows[0])
                table = wandb.Table(
                    columns=columns, data=[[json.dumps(r[c], default=str) for c in columns] for r in rows]
                )
                wandb.log({"completions": table}, step=step)
