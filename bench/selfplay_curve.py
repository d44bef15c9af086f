"""Does SPIRAL self-play make a model better at tic-tac-toe, and does RAE keep its answers from collapsing?

K seeds x S steps of ``codegym-train --task spiral`` (SmolLM2-135M-Instruct, embedded, on the CPU by
default), once with role-conditioned advantages (RAE) and once without (the raw return, SPIRAL's ablation).
Every seed's base model and every run's final model play --eval-games games per seat against the random
opponent, answering greedily; the same seeded games before and after, so the two differ by the policy only.

The report gives, per run, the win rate against random from each seat before and after with a 95% Wilson
interval, the forfeit rate (an unparsable or illegal answer), and the mean response length (tokens) of the
first and last training steps; then, per mode, the mean change over seeds and a plain verdict. A change
that does not hold over seeds is reported as such. ``selfplay_curve.png`` has the mean response length per
step (one line per run) and the win rates before and after; ``results.json`` has every number. A run already
finished in the output directory with the same settings (``<mode>_seed_N/result.json``) is read back, so a
bench cut short goes on where it stopped when the same command is run again.

    python bench/selfplay_curve.py            # 3 seeds x 4 steps, RAE on and off, on 2 CPU cores: ~35 min
    python bench/selfplay_curve.py --quick    # 1 seed x 1 step, 2 games per seat: a smoke run
    python bench/selfplay_curve.py --seeds 0 1 2 3 --steps 100 --games-per-step 32 --eval-games 100   # a GPU
    python bench/selfplay_curve.py --think --max-completion-length 128 ...   # reasoning before each move
"""

from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codegym_trainer.config import EMBEDDED_MODEL, TrainConfig
from codegym_trainer.logs import read_metrics
from codegym_trainer.policy_loading import load_model, load_tokenizer, resolve_source
from codegym_trainer.run import run
from codegym_trainer.selfplay.spiral.evaluation import SelfPlayEvaluator, SelfPlayPoint
from codegym_trainer.stats import mean_sd, over_seeds
from rich.console import Console

MODES = {"rae": True, "no-rae": False}
OPPONENT = "random"


@dataclass(frozen=True)
class Seat:
    """A record from one seat against the random opponent."""

    wins: int
    draws: int
    losses: int
    forfeits: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return self.wins / max(self.games, 1)

    @property
    def forfeit_rate(self) -> float:
        return self.forfeits / max(self.games, 1)


@dataclass
class RunResult:
    """One seed in one mode: the seats before and after, and the mean response length per training step."""

    mode: str
    seed: int
    before: dict[str, Seat]
    after: dict[str, Seat]
    lengths: list[tuple[int, float]]
    seconds: float

    def win_change(self) -> float:
        """The change of the win rate against random, both seats pooled."""
        return pooled(self.after.values()) - pooled(self.before.values())


def pooled(seats: Any) -> float:
    seats = list(seats)
    return sum(s.wins for s in seats) / max(sum(s.games for s in seats), 1)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a binomial rate (sound at 0 and 1 and with few games).

    >>> [round(x, 3) for x in wilson(0, 10)]
    [0.0, 0.278]
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def seats(point: SelfPlayPoint) -> dict[str, Seat]:
    return {role: Seat(r.wins, r.draws, r.losses, r.forfeits) for role, r in point.records[OPPONENT].items()}


def evaluator(args: argparse.Namespace, tokenizer: Any, seed: int, answers: Path) -> SelfPlayEvaluator:
    return SelfPlayEvaluator(
        args.game,
        tokenizer,
        games=args.eval_games,
        chat=tokenizer.chat_template is not None,
        max_new_tokens=args.max_completion_length,
        batch_size=args.eval_batch_size,
        seed=seed,
        answers_dir=answers,
        opponents=[OPPONENT],
        think=args.think,
    )


def evaluate(args: argparse.Namespace, model_path: str, seed: int, answers: Path) -> dict[str, Seat]:
    """The seats of a model (the base model, or a run's final one) against the random opponent."""
    source = resolve_source(model_path)
    tokenizer = load_tokenizer(source, offline=True)
    model = load_model(source, offline=True)
    return seats(evaluator(args, tokenizer, seed, answers)(model, 0))


def config(args: argparse.Namespace, out: Path, mode: str, seed: int) -> TrainConfig:
    return TrainConfig(
        task="spiral",
        game=args.game,
        model=args.model,
        rae=MODES[mode],
        seed=seed,
        train_steps=args.steps,
        selfplay_games_per_step=args.games_per_step,
        learning_rate=args.lr,
        max_completion_length=args.max_completion_length,
        train_temperature=args.temperature,
        skip_eval=True,
        output_dir=out / f"{mode}_seed_{seed}",
        save_steps=max(args.steps, 1),
        completions_interval=max(1, args.steps // 2),
        progress=False,
        offline="on",
        selfplay_think=args.think,
    )


def load_base(path: Path, key: dict[str, Any]) -> dict[str, Seat] | None:
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return {role: Seat(**s) for role, s in saved["seats"].items()} if saved.get("key") == key else None


def base_seats(args: argparse.Namespace, out: Path, seed: int) -> dict[str, Seat]:
    """The base model's seats for a seed's evaluation games, computed once for both modes."""
    path = out / "base" / f"seed_{seed}.json"
    key = {"model": args.model, "games": args.eval_games, "tokens": args.max_completion_length, "game": args.game}
    key.update(prompt_key(args))
    if (done := load_base(path, key)) is not None:
        return done
    print(f"seed {seed}: evaluating the base model", file=sys.stderr)
    result = evaluate(args, args.model, seed, out / "base" / f"seed_{seed}_answers")
    path.write_text(json.dumps({"key": key, "seats": {role: asdict(s) for role, s in result.items()}}))
    return result


def prompt_key(args: argparse.Namespace) -> dict[str, Any]:
    """The prompt's part of a saved result's key: empty for the move-only prompt, so that results saved
    before ``--think`` existed are still read back."""
    return {"think": True} if args.think else {}


def run_key(args: argparse.Namespace) -> dict[str, Any]:
    """What a finished run was made with: it is read back only for the same settings."""
    names = ("model", "game", "steps", "games_per_step", "lr", "temperature", "max_completion_length", "eval_games")
    return {**{name: getattr(args, name) for name in names}, **prompt_key(args)}


def load_run(path: Path, key: dict[str, Any]) -> RunResult | None:
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    if raw.get("key") != key:
        return None
    return RunResult(
        raw["mode"],
        raw["seed"],
        {r: Seat(**s) for r, s in raw["before"].items()},
        {r: Seat(**s) for r, s in raw["after"].items()},
        [tuple(x) for x in raw["lengths"]],
        raw["seconds"],
    )


def train_run(args: argparse.Namespace, out: Path, mode: str, seed: int, before: dict[str, Seat]) -> RunResult:
    """Train one seed in one mode and evaluate its final model; a run already done in ``out`` is read back."""
    cfg = config(args, out, mode, seed)
    saved = cfg.output_dir / "result.json"
    if (done := load_run(saved, run_key(args))) is not None:
        print(f"{mode} seed {seed}: read back from {saved}", file=sys.stderr)
        return done
    if cfg.output_dir.exists():
        shutil.rmtree(cfg.output_dir)  # a run cut short: its logs would be appended to, not replaced
    print(f"{mode} seed {seed}: {args.steps} steps", file=sys.stderr)
    summary = run(cfg, console=Console(file=io.StringIO()))
    if summary.final_model is None:
        raise SystemExit(f"{mode} seed {seed}: the run ended without a final model")
    rows = read_metrics(cfg.output_dir / "metrics.jsonl")
    lengths = [(int(r["step"]), float(r["selfplay/response_length"])) for r in rows if r.get("kind") == "train"]
    after = evaluate(args, summary.final_model, seed, cfg.output_dir / "selfplay_eval_after")
    result = RunResult(mode, seed, before, after, lengths, summary.seconds)
    for checkpoint in cfg.output_dir.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)  # optimiser states; final/ holds the model
    saved.write_text(json.dumps({**asdict(result), "key": run_key(args)}))
    return result


def _rate(seat: Seat) -> str:
    low, high = wilson(seat.wins, seat.games)
    return f"{seat.win_rate:.2f} [{low:.2f}, {high:.2f}]"


def table(results: Sequence[RunResult]) -> list[str]:
    """One row per run; a column pair (before, after) per seat of the game (X and O, or first and second)."""
    roles = list(results[0].before) if results else []
    seats = "".join(f" {role} win vs random before | after |" for role in roles)
    lines = [
        f"| mode | seed |{seats} forfeits before -> after | response tokens, first step -> last |",
        "|---|---|" + "---|---|" * len(roles) + "---|---|",
    ]
    for r in results:
        forfeits = (
            f"{sum(s.forfeits for s in r.before.values())} -> {sum(s.forfeits for s in r.after.values())} "
            f"of {sum(s.games for s in r.after.values())}"
        )
        first, last = r.lengths[0][1], r.lengths[-1][1]
        rates = "".join(f" {_rate(r.before[role])} | {_rate(r.after[role])} |" for role in roles)
        lines.append(f"| {r.mode} | {r.seed} |{rates} {forfeits} | {first:.1f} -> {last:.1f} |")
    return lines


def verdict(results: Sequence[RunResult], mode: str) -> str:
    """Mean and sd over seeds of the win-rate change against random, and of the response length change."""
    runs = [r for r in results if r.mode == mode]
    if not runs:
        return f"{mode}: not run"
    changes = [r.win_change() for r in runs]
    mean, sd = mean_sd(changes)
    length_mean, length_sd = mean_sd([r.lengths[-1][1] - r.lengths[0][1] for r in runs])
    text = (
        f"{mode}: win rate vs random (both seats) {mean:+.3f} +- {sd:.3f} over {len(runs)} seed(s), up in "
        f"{sum(c > 0 for c in changes)}/{len(runs)}; response length {length_mean:+.1f} +- {length_sd:.1f} tokens"
    )
    return f"{text}: {over_seeds(changes)}"


def plot(results: Sequence[RunResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        steps, values = zip(*r.lengths, strict=True)
        left.plot(
            steps, values, marker=".", linestyle="-" if r.mode == "rae" else "--", label=f"{r.mode} seed {r.seed}"
        )
    labels, before, after = [], [], []
    for r in results:
        labels.append(f"{r.mode}\nseed {r.seed}")
        before.append(pooled(r.before.values()))
        after.append(pooled(r.after.values()))
    x = range(len(labels))
    right.bar([i - 0.2 for i in x], before, width=0.4, label="before")
    right.bar([i + 0.2 for i in x], after, width=0.4, label="after")
    right.set_xticks(list(x), labels, fontsize=8)
    left.set(xlabel="step", ylabel="mean response tokens", title="self-play response length")
    right.set(ylabel="win rate", title="greedy win rate vs random (both seats)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 seed x 1 step, 2 games per seat")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    parser.add_argument("--steps", type=int, default=4, help="self-play steps per run (default 4)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES), help="RAE on, off or both")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help=f"policy model (default {EMBEDDED_MODEL})")
    parser.add_argument("--game", default="tictactoe", choices=["tictactoe", "kuhn_poker"], help="the game")
    parser.add_argument("--games-per-step", type=int, default=4, help="self-play games per step (default 4)")
    parser.add_argument("--lr", type=float, default=3e-5, help="learning rate (default 3e-5)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    parser.add_argument("--max-completion-length", type=int, default=24, help="tokens per answer (default 24)")
    parser.add_argument("--eval-games", type=int, default=10, help="evaluation games per seat (default 10)")
    parser.add_argument("--eval-batch-size", type=int, default=20, help="evaluation prompts at once (default 20)")
    parser.add_argument(
        "--think",
        action="store_true",
        help="ask the policy to reason before each move, as SPIRAL's prompts do (give it room: "
        "--max-completion-length 128); the collapse RAE is meant to prevent is of that reasoning",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/selfplay_curve"), help="output directory")
    args = parser.parse_args(argv)
    if args.quick:  # smaller than whatever was asked for, never larger
        args.seeds, args.steps, args.modes = args.seeds[:1], min(args.steps, 1), args.modes
        args.eval_games, args.games_per_step = min(args.eval_games, 2), min(args.games_per_step, 2)
        args.max_completion_length = min(args.max_completion_length, 8)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    import transformers

    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    out: Path = args.out
    (out / "base").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[RunResult] = []
    for seed in args.seeds:
        before = base_seats(args, out, seed)
        for mode in args.modes:
            results.append(train_run(args, out, mode, seed, before))
    minutes = (time.monotonic() - started) / 60
    picture = plot(results, out / "selfplay_curve.png")
    report = [
        f"{len(args.seeds)} seed(s) x {args.steps} self-play steps of {args.game}, model {args.model}, "
        f"{args.games_per_step} games a step, lr {args.lr}, temperature {args.temperature}, "
        f"{args.max_completion_length} tokens an answer{', reasoning asked for' if args.think else ''}; "
        f"{args.eval_games} greedy games per seat vs random; "
        f"{sum(r.seconds for r in results) / 60:.1f} min of training in all (runs read back count theirs), "
        f"{minutes:.1f} min for this command",
        "",
        *table(results),
        "",
        *[verdict(results, mode) for mode in args.modes],
        "",
        f"plot: {picture}",
    ]
    text = "\n".join(report)
    print(text)
    (out / "report.md").write_text(text + "\n")
    saved = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "minutes": minutes,
        "runs": [asdict(r) for r in results],
    }
    (out / "results.json").write_text(json.dumps(saved, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
