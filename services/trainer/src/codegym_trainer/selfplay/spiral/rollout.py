"""SPIRAL self-play through the trainer's seam: a multi-turn rollout and role-conditioned advantages.

Each step, :class:`SelfPlayRollout` plays ``games`` games of one game between the two roles of the one
policy being trained: every turn the role to move sees its observation (the rules, the position, its role,
the answer format) and the policy's answer is its move; an unparsable or illegal answer loses the game at
once. Every turn becomes a training sample whose reward is the game's return to the role that played it.

:class:`~codegym_trainer.selfplay.advantage.RoleAdvantage` turns those returns into advantages with
per-(game, role) baselines: one return per role and game
updates the baseline, and every turn of that role in that game gets the advantage ``R - b``. With RAE off
the advantage is the raw return (the SPIRAL paper's ablation).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ...rollout import Generation, Rollout, TrainerContext, as_prompt
from ..arena import play_games
from ..games import GAMES

# SPIRAL's prompts ask the model to reason before it answers; the RAE ablation is about whether that
# reasoning survives training, so a run can ask for it (``--selfplay-think``). The answer still ends
# with the move in brackets, which ``find_move`` reads as the last bracketed move.
THINK = "First think the position through step by step. Then end your answer with your move in brackets."


def prompt_text(observation: str, *, think: bool) -> str:
    """What the policy is shown for ``observation``: the game's text, with the request to reason first.

    >>> prompt_text("Your move.", think=True).endswith("your move in brackets.")
    True
    >>> prompt_text("Your move.", think=False)
    'Your move.'
    """
    return f"{observation}\n\n{THINK}" if think else observation


def game_return(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """A turn's reward in TRL's form: its game's return to the role that played it (the ``game_return`` column).

    TRL's trainer wants a reward function to exist; the self-play rollout knows each turn's return when its
    game ends and puts it in the rollout itself, so this function stands for that rule in the trainer's logs.

    >>> game_return(["p", "q"], ["[5]", "[1]"], game_return=[1.0, -1.0])
    [1.0, -1.0]
    """
    return [float(r) for r in kwargs["game_return"]]


class _Answer(str):
    """A policy's answer that remembers which generated sample it is.

    The arena keeps the answer object in its ``Turn``, so a turn leads back to its token ids exactly, even
    when two games showed the same position and got the same answer.
    """

    sample: int


@dataclass
class _Recorder:
    """The arena's policy during a rollout: generates through the trainer and keeps every sample."""

    context: TrainerContext
    chat: bool
    think: bool = False
    prompts: list[Any] = field(default_factory=list)
    generations: list[tuple[Generation, int]] = field(default_factory=list)

    def __call__(self, observations: Sequence[str]) -> list[str]:
        # every process generates in the same rounds: a process whose games are over joins with a filler
        self.context.any_process(True)
        prompts = [as_prompt(prompt_text(o, think=self.think), chat=self.chat) for o in observations]
        generation = self.context.generate(prompts, repeats=1)
        answers: list[str] = []
        for i, text in enumerate(generation.texts):
            answer = _Answer(text)
            answer.sample = len(self.prompts) + i
            answers.append(answer)
        self.generations.append((generation, len(self.prompts)))
        self.prompts.extend(prompts)
        return answers

    def idle_until_all_done(self) -> None:
        """Answer filler prompts while another process still plays (a no-op with one process)."""
        while self.context.any_process(False):
            self.context.generate([as_prompt("Say 1.", chat=self.chat)], repeats=1)

    def column(self, name: str) -> list[Any]:
        """A column of every generation, in sample order."""
        return [row for generation, _ in self.generations for row in getattr(generation, name)]


@dataclass
class SelfPlayRollout:
    """The rollout function of SPIRAL: ``games`` self-play games of ``game`` per step and process.

    The dataset rows TRL hands over are ignored: the games are the data. A game with chance is dealt from a
    seed made of ``seed``, the step and the process, so a run is reproducible.
    """

    game: str
    games: int
    chat: bool
    seed: int = 0
    think: bool = False  # ask for reasoning before the move (see ``THINK``)

    def __post_init__(self) -> None:
        if self.game not in GAMES:
            raise ValueError(f"unknown game {self.game!r}; known: {', '.join(sorted(GAMES))}")
        if self.games < 1:
            raise ValueError("a self-play step needs at least one game")

    def __call__(self, context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout:
        deals = random.Random(f"{self.seed}/{context.step}/{context.process_index}")
        starts = [GAMES[self.game](deals) for _ in range(self.games)]
        recorder = _Recorder(context, self.chat, self.think)
        episodes = play_games(starts, recorder)
        recorder.idle_until_all_done()
        prompt_ids, completion_ids = recorder.column("prompt_ids"), recorder.column("completion_ids")
        completions = recorder.column("completions")
        logprobs = recorder.column("logprobs") if all(g.logprobs is not None for g, _ in recorder.generations) else None
        rows: dict[str, list[Any]] = {
            "prompts": [],
            "completions": [],
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "rewards": [],
            "groups": [],
            "episode": [],
            "role": [],
            "turn": [],
        }
        for index, episode in enumerate(episodes):
            returns = episode.returns
            for turn_number, turn in enumerate(episode.turns):
                sample = cast(_Answer, turn.answer).sample
                rows["prompts"].append(recorder.prompts[sample])
                rows["completions"].append(completions[sample])
                rows["prompt_ids"].append(prompt_ids[sample])
                rows["completion_ids"].append(completion_ids[sample])
                if logprobs is not None:
                    rows["logprobs"].append(logprobs[sample])
                rows["rewards"].append(returns[turn.role])
                rows["groups"].append((episode.game, turn.role))
                rows["episode"].append(f"{context.step}/{context.process_index}/{index}")
                rows["role"].append(turn.role)
                rows["turn"].append(turn_number)
        return Rollout(
            prompts=rows["prompts"],
            completions=rows["completions"],
            prompt_ids=rows["prompt_ids"],
            completion_ids=rows["completion_ids"],
            logprobs=rows["logprobs"] if logprobs is not None else None,
            rewards=rows["rewards"],
            groups=rows["groups"],
            extra={"episode": rows["episode"], "role": rows["role"], "turn": rows["turn"]},
            metrics=self._metrics(episodes, rows["completion_ids"]),
        )

    def _metrics(self, episodes: Sequence[Any], completion_ids: list[list[int]]) -> dict[str, float]:
        n = len(episodes)
        out = {
            "selfplay/games": float(n),
            "selfplay/turns_per_game": sum(len(e.turns) for e in episodes) / n,
            "selfplay/forfeit_rate": sum(e.final.forfeited_by is not None for e in episodes) / n,
            "selfplay/response_length": sum(map(len, completion_ids)) / max(len(completion_ids), 1),
        }
        roles = episodes[0].final.roles
        out["selfplay/draw_rate"] = sum(all(v == 0 for v in e.returns.values()) for e in episodes) / n
        for role in roles:
            out[f"selfplay/{role}/win_rate"] = sum(e.returns[role] > 0 for e in episodes) / n
        return out
