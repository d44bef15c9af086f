"""The trainer's seam: a rollout function makes a step's samples, an advantage function weighs them.

Every training step, :class:`~codegym_trainer.grpo.CodegymGRPOTrainer` calls

1. ``step_rollout(context, inputs) -> Rollout``: from this process's rows of the training dataset, the samples
   to learn from: each a prompt, the policy's completion (text and token ids), a reward and a group key;
2. ``step_advantage(rollout, context) -> list[float]``: one advantage per sample;

and hands the samples and advantages to TRL's policy loss. GRPO on code is :func:`code_rollout` with
:class:`GroupAdvantage`; self-play swaps in a multi-turn rollout and role-conditioned advantages. A rollout
reaches the model only through its :class:`TrainerContext` (generate, score with the reward functions,
gather across processes), so TRL's internals are known to one class (``grpo.py``'s context and trainer),
and a TRL upgrade breaks that one place; and the sandbox only through ``context.sandbox``, the run's
:class:`~codegym_trainer.sandbox.RunSandbox`, so a client's URLs, timeouts and retries are decided once.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from codegym_evaluator.messages import message_text

if TYPE_CHECKING:
    from .sandbox import RunSandbox

T = TypeVar("T")


@dataclass(frozen=True)
class Generation:
    """The policy's completions of a list of prompts, in order.

    ``completions`` are in the prompts' form: a string for a plain prompt, a list of one assistant message
    for a chat prompt (what TRL's reward functions receive); ``texts`` are the strings either way.
    ``logprobs`` are the sampler's per-token log-probabilities when the generator reports them (vLLM), for
    the loss's importance-sampling correction. ``tool_mask``: 1 for the policy's own tokens, 0 for tokens
    the generator spliced in (TRL's tool results); None when every token is the policy's.
    """

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    completions: list[Any]
    logprobs: list[list[float]] | None = None
    tool_mask: list[list[int]] | None = None

    @property
    def texts(self) -> list[str]:
        return [joined_text(c) for c in self.completions]


def as_prompt(text: str, *, chat: bool) -> Any:
    """A user prompt in the form the policy is trained with: one chat message for a chat model, else the text."""
    return [{"role": "user", "content": text}] if chat else text


def joined_text(completion: Any) -> str:
    """A completion as one text: the string itself, or every chat message's content joined, for logs and tables."""
    if isinstance(completion, str):
        return completion
    return "".join(message_text(message.get("content")) for message in completion)


@dataclass
class Rollout:
    """One process's samples of a training step, in the order the advantage function returns advantages.

    ``rewards`` are the totals advantages are computed from (None: not scored, advantage 0); ``reward_parts``
    are the reward functions' own values for the completions table (by function name); ``groups`` say which
    samples share a baseline (a GRPO group's index, a (game, role)); ``extra`` are further columns of the
    completions table and ``metrics`` scalars logged for the step. ``completion_mask`` (None: all ones) has
    one 0/1 per completion token: the loss learns only from the 1s, the policy's own tokens; a multi-turn
    rollout puts 0 on what it wrote into the completion itself (feedback, tool results).
    """

    prompts: list[Any]
    completions: list[Any]
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    rewards: list[float | None]
    groups: list[Hashable]
    logprobs: list[list[float]] | None = None
    reward_parts: dict[str, list[float | None]] = field(default_factory=dict)
    extra: dict[str, list[Any]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    completion_mask: list[list[int]] | None = None

    def __post_init__(self) -> None:
        n = len(self.prompts)
        columns: dict[str, Sequence[Any]] = {
            "completions": self.completions,
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "rewards": self.rewards,
            "groups": self.groups,
            **({"logprobs": self.logprobs} if self.logprobs is not None else {}),
            **({"completion_mask": self.completion_mask} if self.completion_mask is not None else {}),
            **{f"reward_parts[{k}]": v for k, v in self.reward_parts.items()},
            **{f"extra[{k}]": v for k, v in self.extra.items()},
        }
        wrong = {name: len(values) for name, values in columns.items() if len(values) != n}
        if wrong:
            raise ValueError(f"a rollout of {n} prompts has columns of other lengths: {wrong}")
        if self.completion_mask is not None:
            ragged = [
                i
                for i, (m, ids) in enumerate(zip(self.completion_mask, self.completion_ids, strict=True))
                if len(m) != len(ids)
            ]
            if ragged:
                raise ValueError(f"completion masks of samples {ragged} differ in length from their completions")

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def texts(self) -> list[str]:
        return [joined_text(c) for c in self.completions]


class TrainerContext(Protocol):
    """What a rollout or advantage function may ask of the trainer.

    ``generate``, ``score``, ``gather`` and ``any_process`` are collectives in a multi-process run: every
    process calls them the same number of times, in the same order.
    """

    @property
    def step(self) -> int:
        """Optimisation steps finished so far."""
        ...

    @property
    def group_size(self) -> int:
        """Completions per prompt in the dataset rows a step receives (GRPO's group)."""
        ...

    @property
    def process_index(self) -> int: ...

    @property
    def num_processes(self) -> int: ...

    @property
    def tokenizer(self) -> Any:
        """The policy's tokenizer (its chat template formats self-play prompts)."""
        ...

    @property
    def sandbox(self) -> RunSandbox:
        """The run's sandbox: a rollout that runs programs makes its clients here (``scorer()``, ``client()``)."""
        ...

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        """Sample one completion per prompt with the training policy.

        ``repeats``: the prompts come in runs of that many equal prompts (a generator may then encode each
        once); None means the trainer's group size, 1 that every prompt stands alone.
        """
        ...

    def generate_ids(self, prompt_ids: Sequence[list[int]]) -> Generation:
        """Sample one completion of each token sequence as it is (no chat template, no re-tokenising): a
        multi-turn rollout continues a conversation from the exact tokens the policy produced."""
        ...

    def score(
        self, inputs: Sequence[Mapping[str, Any]], prompts: Sequence[Any], generation: Generation
    ) -> dict[str, list[float | None]]:
        """The trainer's reward functions on these completions, by function name (None: not scored).

        ``inputs`` are the dataset rows of the prompts, whose columns the reward functions read. The rewards
        are gathered across processes as one tensor, so every process scores as many completions.
        """
        ...

    def gather(self, values: Sequence[T]) -> list[T]:
        """Every process's ``values``, concatenated in process order."""
        ...

    def any_process(self, flag: bool) -> bool:
        """Whether ``flag`` is true in any process (for loops whose length differs between processes)."""
        ...


class StepRollout(Protocol):
    """Makes one step's samples from this process's dataset rows."""

    def __call__(self, context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout: ...


class StepAdvantage(Protocol):
    """One advantage per sample of a rollout, in its order.

    It may add to ``rollout.metrics`` (a baseline, say): the trainer logs them after it has the advantages.
    """

    def __call__(self, rollout: Rollout, context: TrainerContext) -> list[float]: ...


def total_reward(
    parts: Mapping[str, Sequence[float | None]], weights: Sequence[float] | None = None
) -> list[float | None]:
    """Each sample's weighted sum of the scored parts; None when no part scored it (TRL's rule).

    >>> total_reward({"a": [1.0, None, None], "b": [0.5, 0.5, None]})
    [1.5, 0.5, None]
    """
    columns = list(parts.values())
    w = list(weights) if weights is not None else [1.0] * len(columns)
    totals: list[float | None] = []
    for values in zip(*columns, strict=True):
        scored = [weight * v for weight, v in zip(w, values, strict=True) if v is not None and not math.isnan(v)]
        totals.append(sum(scored) if scored else None)
    return totals


def code_rollout(context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout:
    """GRPO on code: one completion per dataset row (rows come in groups of equal prompts), scored by the
    trainer's reward functions; a sample's group is its GRPO group across all processes."""
    prompts = [row["prompt"] for row in inputs]
    generation = context.generate(prompts)
    parts = context.score(inputs, prompts, generation)
    offset = context.process_index * len(inputs)
    return Rollout(
        prompts=prompts,
        completions=generation.completions,
        prompt_ids=generation.prompt_ids,
        completion_ids=generation.completion_ids,
        logprobs=generation.logprobs,
        completion_mask=generation.tool_mask,
        rewards=total_reward(parts),
        reward_parts=parts,
        groups=[(offset + i) // context.group_size for i in range(len(inputs))],
    )


def group_advantages(rewards: list[float | None], group_size: int, *, scale: bool = True) -> list[float]:
    """GRPO advantages of consecutive groups of ``group_size`` (see :func:`keyed_advantages`).

    >>> [round(a, 3) for a in group_advantages([1.0, 0.0, None, 0.0], 4)]
    [1.155, -0.577, 0.0, -0.577]
    """
    if len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    return keyed_advantages(rewards, [i // group_size for i in range(len(rewards))], scale=scale)


def keyed_advantages(rewards: Sequence[float | None], keys: Sequence[Hashable], *, scale: bool = True) -> list[float]:
    """Each reward minus the mean of the scored rewards with its key, over their (sample) std when ``scale``.

    A masked reward (None) is left out of its group's statistics and gets advantage 0; so does every member of
    a group with one scored reward. This is TRL's GRPO normalisation (``nanstd``, plus 1e-4).

    >>> keyed_advantages([1.0, 3.0, 5.0, None], ["a", "a", "b", "b"], scale=False)
    [-1.0, 1.0, 0.0, 0.0]
    """
    scored: dict[Hashable, list[float]] = {}
    for key, reward in zip(keys, rewards, strict=True):
        if reward is not None and not math.isnan(reward):
            scored.setdefault(key, []).append(reward)
    stats: dict[Hashable, tuple[float, float]] = {}
    for key, values in scored.items():
        mean = math.fsum(values) / len(values)
        spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))
        stats[key] = (mean, spread)
    advantages = []
    for key, reward in zip(keys, rewards, strict=True):
        if reward is None or math.isnan(reward):
            advantages.append(0.0)
            continue
        mean, spread = stats[key]
        advantages.append((reward - mean) / (spread + 1e-4) if scale else reward - mean)
    return advantages


@dataclass(frozen=True)
class GroupAdvantage:
    """GRPO's advantage: rewards normalised within each ``Rollout.groups`` key, over every process's samples
    (a group may span two processes)."""

    scale: bool = True

    def __call__(self, rollout: Rollout, context: TrainerContext) -> list[float]:
        counts = context.gather([len(rollout)])
        advantages = keyed_advantages(context.gather(rollout.rewards), context.gather(rollout.groups), scale=self.scale)
        start = sum(counts[: context.process_index])
        return advantages[start : start + len(rollout)]
