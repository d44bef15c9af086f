"""One SPIRAL run (``codegym-train --task spiral``): self-play of one game, evaluations against fixed opponents.

The run is a self-play run (:mod:`codegym_trainer.lifecycle`: the code task's platform, model loading, logs,
checkpoints and Ctrl-C handling; ``selfplay.training``: role baselines saved with every checkpoint); what is
SPIRAL's own is the data (the games themselves: TRL's dataset rows only pace the steps), the seam's rollout and
advantage functions, and the evaluation against fixed opponents.
"""

from __future__ import annotations

import random

from datasets import Dataset
from rich.console import Console

from ... import lifecycle
from ...config import TrainConfig
from ...platform import Platform
from ...progress import TIMES
from ...rollout import as_prompt
from ...summary import RunSummary
from .. import training
from ..advantage import RoleAdvantage
from ..games import GAMES
from .evaluation import SelfPlayEvalCallback, SelfPlayEvaluator
from .rollout import SelfPlayRollout, game_return, prompt_text

MOST_TURNS = {"tictactoe": 9, "kuhn_poker": 3}


def step_split(config: TrainConfig, platform: Platform) -> tuple[int, int]:
    """(dataset rows per forward pass, accumulation steps) for a step of up to games x the game's most turns."""
    return training.step_split(config.selfplay_games_per_step * MOST_TURNS[config.game], platform)


def run_spiral(config: TrainConfig, console: Console) -> RunSummary:
    """Train by self-play, evaluate against fixed opponents, save the model; the summary of the run."""
    run = lifecycle.start(config)
    tokenizer, model, chat = lifecycle.load_policy(
        run, f"self-play of {config.game}, RAE {'on' if config.rae else 'off'}"
    )
    opening = GAMES[config.game](random.Random(config.seed))
    first = prompt_text(opening.observation(opening.roles[0]), think=config.selfplay_think)
    dataset = Dataset.from_list([{"prompt": as_prompt(first, chat=chat)}] * training.DATASET_ROWS)
    advantage = training.load_baselines(RoleAdvantage.create(enabled=config.rae), run)

    roles = GAMES[config.game](random.Random(0)).roles
    columns = [
        ("return", "reward", ".2f"),
        *[(f"{role} wins", f"selfplay/{role}/win_rate", ".0%") for role in roles],
        ("forfeits", "selfplay/forfeit_rate", ".0%"),
        ("tokens", "selfplay/response_length", ".1f"),
        *TIMES[::2],  # generation and optimisation: self-play has no scoring phase
    ]
    sink, display = lifecycle.open_logs(run, console, columns=columns, evaluation="win rate vs random")
    evaluator = SelfPlayEvaluator(
        config.game,
        tokenizer,
        games=config.selfplay_eval_games,
        chat=chat,
        max_new_tokens=config.max_completion_length,
        batch_size=config.eval_batch_size,
        seed=config.seed,
        answers_dir=config.output_dir / "selfplay_eval",
        think=config.selfplay_think,
    )
    try:
        steps, final_model = training.train(
            run,
            (tokenizer, model),
            dataset=dataset,
            split=step_split(config, run.platform),
            rollout=SelfPlayRollout(
                config.game, config.selfplay_games_per_step, chat=chat, seed=config.seed, think=config.selfplay_think
            ),
            advantage=advantage,
            reward=game_return,
            evaluation=SelfPlayEvalCallback(evaluator, sink, every=config.selfplay_eval_every, display=display),
            sink=sink,
            display=display,
        )
    finally:
        sink.close()

    points = evaluator.points
    lines = [f"before (step {points[0].step}): {points[0].describe()}"] if points else []
    if len(points) > 1:
        lines.append(f"after (step {points[-1].step}): {points[-1].describe()}")
    return training.summarise(
        run,
        console,
        steps=steps,
        final_model=final_model,
        head={"task": "spiral", "game": config.game, "rae": config.rae},
        tail={"selfplay_evaluations": [{"step": p.step, **p.metrics()} for p in points]},
        title="self-play",
        lines=lines,
    )
