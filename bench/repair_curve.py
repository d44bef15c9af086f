"""``learning_curve.py --task code-repair``: single-turn GRPO against code-repair GRPO, at the same generation budget.

Two arms train on the trainer's own tasks from the same base model, seed by seed:

- ``single-turn``: ``codegym-train --task code`` with K x ``--group-size`` completions per prompt;
- ``code-repair``: ``codegym-train --task code-repair --max-turns K`` with ``--group-size`` conversations per
  prompt, each of up to K answers (an answer that fails its public tests reads their feedback and answers again).

The budget rule: the same prompts and steps, and the same most answers generated per prompt and step (K x
group size), each of at most ``--max-completion-length`` tokens. Single-turn spends it all; code repair spends
at most that (an answer that passes is not asked again), so the rule never favours the repair arm; what each arm
actually generated (answers and their tokens a step) is reported beside the result. With ``--tools`` the repair
arm runs TRL's tool loop, which caps a whole conversation (tool results included) at the completion length:
there its cap is K x ``--max-completion-length`` a conversation, the same most tokens per prompt and step.

Both arms, and the base model once, are evaluated the same way after training: the 12 held-out problems through
``codegym-eval run --turns K`` (:func:`codegym_evaluator.runner.run_evaluation`, its repair rounds and
:mod:`~codegym_evaluator.turn_stats`), its model endpoint served from the policy in this process
(:class:`PolicyEndpoint`). pass@1 after turn t: turn 1 is the first answer; turn t, after t-1 rounds of feedback
on the tests a model may see (the evaluator's default choice of them), judged on all tests. ``--eval-samples`` sampled
answers per problem at temperature 0.8 (greedy with 0). The feedback is worded as in training (the trainer's
code-repair rollout asks with the evaluator's ``prompts.repair_request``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import torch
from codegym_evaluator.config import RunConfig
from codegym_evaluator.runner import run_evaluation
from codegym_trainer.config import TrainConfig
from codegym_trainer.data import HELDOUT_FILE
from codegym_trainer.platform import detect
from codegym_trainer.policy_loading import load_model, load_tokenizer, resolve_source
from codegym_trainer.run import run
from codegym_trainer.stats import mean_sd, over_seeds
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curve_common import base_config, sandbox

ARMS = ("single-turn", "code-repair")
TEMPERATURE = 0.8  # the held-out samples' (the trainer's default eval temperature)


class PolicyEndpoint(httpx.AsyncBaseTransport):
    """``/v1/chat/completions`` answered by a local policy, for the evaluator's model client: the requests in
    flight at once are generated together (left-padded batches of at most ``batch_size`` sequences), greedy
    where a request asks temperature 0, else sampled on a random state seeded from ``seed`` and the batch."""

    def __init__(self, model: Any, tokenizer: Any, *, max_batch: int, seed: int) -> None:
        self.model, self.tokenizer, self.max_batch, self.seed = model, tokenizer, max_batch, seed
        self.pending: list[tuple[dict[str, Any], asyncio.Future[list[str]]]] = []
        self.batches = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        answer: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self.pending.append((body, answer))
        for _ in range(5):  # let every request already in flight join this batch
            await asyncio.sleep(0)
        if self.pending:
            batch, self.pending = self.pending, []
            self._answer(batch)
        texts = await answer
        choices = [{"index": i, "message": {"role": "assistant", "content": t}} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"choices": choices})

    def _answer(self, batch: list[tuple[dict[str, Any], asyncio.Future[list[str]]]]) -> None:
        texts: list[list[str]] = [[] for _ in batch]
        kinds: dict[tuple[float, int], list[tuple[int, str]]] = {}  # (temperature, max tokens) -> (request, prompt)
        for k, (body, _) in enumerate(batch):
            prompt = str(
                self.tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
            )
            kind = (float(body["temperature"]), int(body["max_tokens"]))
            kinds.setdefault(kind, []).extend([(k, prompt)] * int(body.get("n", 1)))
        for (temperature, tokens), rows in sorted(kinds.items()):
            for start in range(0, len(rows), self.max_batch):
                chunk = rows[start : start + self.max_batch]
                for (k, _), out in zip(chunk, self._generate([t for _, t in chunk], temperature, tokens), strict=True):
                    texts[k].append(out)
        for (_, answer), got in zip(batch, texts, strict=True):
            answer.set_result(got)

    @torch.no_grad()
    def _generate(self, prompts: list[str], temperature: float, max_new_tokens: int) -> list[str]:
        model, tok = self.model, self.tokenizer
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
        devices = [model.device.index or 0] if model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.seed + self.batches)
            self.batches += 1
            out = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **sampling)
        width = enc["input_ids"].shape[1]
        return [str(tok.decode(ids, skip_special_tokens=True)) for ids in out[:, width:]]


@dataclass
class TurnPoint:
    """One model's held-out evaluation by turn."""

    pass_at_1: list[float | None]  # after turn 1..K
    asked: list[int]  # answers asked again at each turn (0 at turn 1)
    fixed: list[int]  # of those, the ones that passed
    mean_turns_used: float | None
    samples: int
    seconds: float


def turn_point(model_path: str, args: argparse.Namespace, url: str, out: Path, seed: int) -> TurnPoint:
    """The held-out problems through ``codegym-eval run --turns K`` on ``model_path``; answers under ``out``."""
    start = time.perf_counter()
    config = TrainConfig(model=model_path, sandbox_url=[url], vllm_mode="off")
    platform = detect(config, probe_hub=False)
    source = resolve_source(model_path)
    tokenizer, model = load_tokenizer(source, offline=platform.offline), load_model(source, offline=platform.offline)
    if platform.kind != "cpu":
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(platform.precision, torch.float32)
        model = model.to("cuda", dtype=dtype)
    model.train(False)
    n = max(args.eval_samples, 1)
    run_config = RunConfig(
        dataset="jsonl",
        path=str(HELDOUT_FILE),
        limit=args.heldout_limit,
        base_url="http://policy/v1",
        model="policy",
        n=n,
        temperature=TEMPERATURE if args.eval_samples else 0.0,
        max_tokens=args.max_new_tokens,
        model_concurrency=64,  # every request at once: the endpoint batches them
        turns=args.max_turns,
        sandbox_url=[url],
        output=str(out),
    )
    endpoint = PolicyEndpoint(model, tokenizer, max_batch=args.eval_batch_size, seed=seed)
    outcome = asyncio.run(run_evaluation(run_config, model_transport=endpoint))
    if outcome.error is not None or outcome.turns is None:
        raise SystemExit(f"the held-out evaluation of {model_path} failed: {outcome.error}")
    turns = outcome.turns.by_turn
    return TurnPoint(
        [t.pass_at_1 for t in turns],
        [t.asked for t in turns],
        [t.fixed for t in turns],
        outcome.turns.mean_turns_used,
        n,
        time.perf_counter() - start,
    )


@dataclass
class ArmResult:
    """One arm, one seed: the held-out evaluation by turn after training, and what training generated."""

    arm: str
    seed: int
    after: TurnPoint
    rewards: list[tuple[int, float]]
    answers_per_step: float  # answers generated per step
    tokens_per_step: float  # tokens of those answers per step
    seconds: float


def arm_config(args: argparse.Namespace, arm: str, seed: int, out: Path, url: str) -> TrainConfig:
    """A seed's settings in one arm, under the budget rule (the module's docstring)."""
    config = base_config(args, out / arm, seed, url)
    # both arms are evaluated by turn afterwards; every step's completions are kept to count what was generated
    update: dict[str, Any] = {"skip_eval": True, "eval_interval": 0, "completions_interval": 1}
    if arm == "single-turn":
        update |= {"task": "code", "group_size": args.group_size * args.max_turns}
    else:
        update |= {"task": "code-repair", "max_turns": args.max_turns, "turn_discount": args.turn_discount}
        if args.tools:  # a model that calls tools: run_python, run_tests and submit in TRL's environments
            # TRL's tool loop caps a whole conversation, tool results included, at --max-completion-length
            update |= {"tools": True, "max_completion_length": args.max_completion_length * args.max_turns}
    return TrainConfig.model_validate({**config.model_dump(), **update})


def generated(config: TrainConfig) -> tuple[float, float]:
    """Answers and completion tokens the policy generated per step (its own turns only, not the feedback),
    from every step's completions file, re-tokenized with the policy's tokenizer."""
    tokenizer = load_tokenizer(resolve_source(config.model), offline=True)
    answers = tokens = 0
    files = sorted((config.output_dir / "completions").glob("step_*.jsonl"))
    for path in files:
        for line in path.read_text().splitlines():
            completion = json.loads(line)["completion"]
            if isinstance(completion, str):
                own = [completion]
            else:  # chat messages: the policy's answers (and tool calls), the feedback or tool results between them
                own = [
                    str(m.get("content") or "") + (json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")
                    for m in completion
                    if m["role"] == "assistant"
                ]
            answers += len(own)
            tokens += sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in own)
    return answers / max(len(files), 1), tokens / max(len(files), 1)


def train_arm(args: argparse.Namespace, arm: str, seed: int, out: Path, url: str) -> ArmResult:
    """Train one arm for one seed and evaluate its final model by turn; a finished one is read back."""
    config = arm_config(args, arm, seed, out, url)
    saved = config.output_dir / "result.json"
    if saved.is_file():
        print(f"{arm}, seed {seed}: read back from {saved}", file=sys.stderr)
        data = json.loads(saved.read_text())
        after = TurnPoint(**data.pop("after"))
        return ArmResult(after=after, rewards=[(int(a), float(b)) for a, b in data.pop("rewards")], **data)
    if config.output_dir.exists():
        shutil.rmtree(config.output_dir)  # cut short: its logs would be appended to, not replaced
    print(f"{arm}, seed {seed}: {args.steps} steps", file=sys.stderr)
    summary = run(config, console=Console(file=io.StringIO()))
    if summary.final_model is None:
        raise SystemExit(f"{arm}, seed {seed}: the run ended without a final model")
    after = turn_point(summary.final_model, args, url, config.output_dir / "turns", seed)
    answers, tokens = generated(config)
    result = ArmResult(arm, seed, after, summary.rewards, answers, tokens, summary.seconds + after.seconds)
    for checkpoint in config.output_dir.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
    saved.write_text(json.dumps(asdict(result)))
    return result


def base_point(args: argparse.Namespace, url: str, out: Path) -> TurnPoint:
    """The base model's evaluation by turn, once for every arm and seed (read back when its settings match)."""
    key = {k: getattr(args, k) for k in ("model", "heldout_limit", "eval_samples", "max_new_tokens", "max_turns")}
    path = out / "base" / "turns.json"
    if path.is_file() and (data := json.loads(path.read_text())).pop("key") == key:
        return TurnPoint(**data)
    if (out / "base" / "turns").exists():
        shutil.rmtree(out / "base" / "turns")
    print("base model: held-out evaluation by turn", file=sys.stderr)
    point = turn_point(args.model, args, url, out / "base" / "turns", seed=0)
    path.write_text(json.dumps({**asdict(point), "key": key}))
    return point


def _f(v: float | None, signed: bool = False) -> str:
    return "-" if v is None else f"{v:+.3f}" if signed else f"{v:.3f}"


def _gain(before: TurnPoint, after: TurnPoint, t: int) -> float | None:
    a, b = after.pass_at_1[t], before.pass_at_1[t]
    return None if a is None or b is None else a - b


def report(args: argparse.Namespace, base: TurnPoint, results: Sequence[ArmResult], minutes: float) -> list[str]:
    """The per-seed table, the mean and sd over seeds per arm and turn, and what they support."""
    k = args.max_turns
    turns = " | ".join(f"turn {t} after | gain" for t in range(1, k + 1))
    lines = [
        f"{len(args.seeds)} seed(s) x {args.steps} GRPO steps per arm, model {args.model}, {args.batch_size} prompts "
        f"a step, at most {k} x {args.group_size} answers per prompt and step in both arms (single-turn: "
        f"{k * args.group_size} completions; code-repair: {args.group_size} conversations of up to {k} answers), "
        f"lr {args.lr}; held-out: {base.samples} answer(s) per problem, pass@1 after each turn; {minutes:.1f} min",
        "",
        "base model: "
        + ", ".join(f"turn {t + 1} {_f(p)}" for t, p in enumerate(base.pass_at_1))
        + f" (fixed by feedback {sum(base.fixed)}/{sum(base.asked)})",
        "",
        f"| arm | seed | {turns} | fixed by feedback | answers/step | tokens/step |",
        "|---|---|" + "---|---|" * k + "---|---|---|",
    ]
    for r in results:
        cells = " | ".join(f"{_f(r.after.pass_at_1[t])} | {_f(_gain(base, r.after, t), True)}" for t in range(k))
        fixed = f"{sum(r.after.fixed)}/{sum(r.after.asked)}"
        lines.append(f"| {r.arm} | {r.seed} | {cells} | {fixed} | {r.answers_per_step:.1f} | {r.tokens_per_step:.0f} |")
    lines += [
        "",
        "| arm | turn | pass@1 after (mean +- sd) | gain (mean +- sd) | over seeds |",
        "|---|---|---|---|---|",
    ]
    for arm in ARMS:
        mine = [r for r in results if r.arm == arm]
        for t in range(k):
            gains = [g for r in mine if (g := _gain(base, r.after, t)) is not None]
            after = [p for r in mine if (p := r.after.pass_at_1[t]) is not None]
            if gains:
                (am, asd), (gm, gsd) = mean_sd(after), mean_sd(gains)
                lines.append(
                    f"| {arm} | {t + 1} | {am:.3f} +- {asd:.3f} | {gm:+.3f} +- {gsd:.3f} | {over_seeds(gains)} |"
                )
    lines += ["", *difference(base, results, k)]
    return lines


def difference(base: TurnPoint, results: Sequence[ArmResult], k: int) -> list[str]:
    """Code repair minus single-turn, seed by seed, at the first and the last turn."""
    lines = []
    by = {(r.arm, r.seed): r for r in results}
    for t in sorted({0, k - 1}):
        diffs = [
            a - b
            for (arm, seed), r in by.items()
            if arm == ARMS[1] and (s := by.get((ARMS[0], seed))) is not None
            if (a := r.after.pass_at_1[t]) is not None and (b := s.after.pass_at_1[t]) is not None
        ]
        if diffs:
            mean, sd = mean_sd(diffs)
            lines.append(
                f"code-repair minus single-turn, pass@1 after turn {t + 1}: {mean:+.3f} +- {sd:.3f} over "
                f"{len(diffs)} seed(s): {ahead(diffs)}"
            )
    return lines


def ahead(diffs: Sequence[float]) -> str:
    """Which arm a difference measured once per seed puts ahead, by ``over_seeds``'s rule: every seed the same
    way and the mean beyond the sd."""
    mean, sd = mean_sd(diffs)
    if len(diffs) < 2:
        return "one seed cannot separate the arms from noise"
    if all(d > 0 for d in diffs) and mean > sd:
        return "code repair ahead, over seeds"
    if all(d < 0 for d in diffs) and -mean > sd:
        return "single-turn ahead, over seeds"
    return "no difference beyond seed noise (a null result)"


def main(args: argparse.Namespace) -> int:
    """Both arms over the seeds, the base model once; ``report.md`` and ``results.json`` in ``args.out``."""
    if args.max_turns < 2:
        raise SystemExit("--task code-repair compares turns: --max-turns must be at least 2")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with sandbox(args) as url:
        base = base_point(args, url, out)
        results = [train_arm(args, arm, seed, out, url) for seed in args.seeds for arm in ARMS]
    minutes = (time.monotonic() - started) / 60
    text = "\n".join(report(args, base, results, minutes))
    print(text)
    (out / "report.md").write_text(text + "\n")
    saved = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "minutes": minutes,
        "base": asdict(base),
        "arms": [asdict(r) for r in results],
    }
    (out / "results.json").write_text(json.dumps(saved, indent=2, default=str))
    return 0
