"""Role-conditioned advantage estimation (RAE): one return baseline per (game, role).

In a zero-sum game the mean return of a batch is about 0 whatever the policy does, and a seat can be worth
more than another (X wins more tic-tac-toe than O). So each (game, role) keeps its own baseline, an
exponential moving average of that role's returns, ``b <- alpha * b + (1 - alpha) * R`` with alpha = 0.95,
and a return's advantage is ``R - b``, given to every turn that role played in the episode.

Within one training step every advantage is computed from the baselines as they were before the step; then
each baseline takes in that step's returns. A step that brought ``n`` returns of one key, with mean ``m``,
moves it as ``n`` single updates by ``m`` would: ``b <- alpha**n * b + (1 - alpha**n) * m``. For ``n = 1``
that is the update above; for more, it weighs the step's returns equally, so it needs only their sum and
count, which processes can add up in any order (``merge_return_sums``): every process then holds the same
baselines.

With RAE off the advantage is the plain return R (REINFORCE without a baseline), the ablation SPIRAL
compares against; the baselines are still tracked so both runs log them.

:class:`RoleAdvantage` is the trainer's advantage function for every self-play task; what counts as one
return differs by task: one per game and role (SPIRAL: a role's turns share its game's return), or one per
sample (the code-output game: one program or one prediction is one round).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self, cast

from ..rollout import Rollout, TrainerContext

RoleKey = tuple[str, str]
"""(game, role)."""

ALPHA = 0.95
INITIAL_BASELINE = 0.0


@dataclass(frozen=True)
class ReturnSum:
    """The sum and count of one key's returns in a step: what processes add up to share baselines."""

    total: float = 0.0
    count: int = 0

    def __add__(self, other: ReturnSum) -> ReturnSum:
        return ReturnSum(self.total + other.total, self.count + other.count)


def sum_returns(samples: Iterable[tuple[RoleKey, float]]) -> dict[RoleKey, ReturnSum]:
    """Each key's sum and count of returns."""
    sums: dict[RoleKey, ReturnSum] = {}
    for key, value in samples:
        sums[key] = sums.get(key, ReturnSum()) + ReturnSum(value, 1)
    return sums


def merge_return_sums(parts: Iterable[Mapping[RoleKey, ReturnSum]]) -> dict[RoleKey, ReturnSum]:
    """The reduction across processes: key by key, the sums and counts added (keys one process lacks count 0).

    >>> merge_return_sums([{("ttt", "X"): ReturnSum(1.0, 2)}, {("ttt", "X"): ReturnSum(-1.0, 1)}])
    {('ttt', 'X'): ReturnSum(total=0.0, count=3)}
    """
    merged: dict[RoleKey, ReturnSum] = {}
    for part in parts:
        for key, value in part.items():
            merged[key] = merged.get(key, ReturnSum()) + value
    return dict(sorted(merged.items()))


@dataclass
class RoleBaselines:
    """The baseline of every (game, role) seen so far; a key not yet seen starts at ``initial``."""

    alpha: float = ALPHA
    initial: float = INITIAL_BASELINE
    values: dict[RoleKey, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha < 1.0:
            raise ValueError(f"alpha must lie in [0, 1), not {self.alpha}")

    def get(self, key: RoleKey) -> float:
        """The baseline of ``key``."""
        return self.values.get(key, self.initial)

    def update(self, sums: Mapping[RoleKey, ReturnSum]) -> None:
        """Take in one step's returns: ``b <- alpha**n * b + (1 - alpha**n) * mean``, per key."""
        for key, value in sums.items():
            if value.count:
                keep = self.alpha**value.count
                self.values[key] = keep * self.get(key) + (1.0 - keep) * value.total / value.count

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, for checkpoints and for a file that processes share."""
        return {
            "alpha": self.alpha,
            "initial": self.initial,
            "values": [[game, role, value] for (game, role), value in sorted(self.values.items())],
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> RoleBaselines:
        """The baselines ``state_dict`` wrote."""
        values = {(str(game), str(role)): float(value) for game, role, value in state["values"]}
        return cls(alpha=float(state["alpha"]), initial=float(state["initial"]), values=values)

    def metrics(self) -> dict[str, float]:
        """``rae/baseline/<game>/<role>`` for a logger."""
        return {f"rae/baseline/{game}/{role}": value for (game, role), value in sorted(self.values.items())}


Share = Callable[[dict[RoleKey, ReturnSum]], dict[RoleKey, ReturnSum]]
"""This process's sums in, every process's merged sums out (a collective: every process calls it every step)."""


def local_only(sums: dict[RoleKey, ReturnSum]) -> dict[RoleKey, ReturnSum]:
    """The ``Share`` of a single process."""
    return sums


def all_gather_sums(sums: dict[RoleKey, ReturnSum]) -> dict[RoleKey, ReturnSum]:
    """The ``Share`` of a ``torch.distributed`` run: every process's sums gathered, then merged.

    Processes can have seen different keys (a game none of its episodes played), so the sums travel as
    objects rather than a tensor of agreed shape. Without an initialised process group it is ``local_only``.
    """
    import torch.distributed as dist  # the trainer has torch; the rest of this module does not need it

    if not (dist.is_available() and dist.is_initialized()):
        return sums
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, sums)
    return merge_return_sums(gathered)


class RoleConditionedAdvantage:
    """Advantages for one training step's returns, from per-(game, role) baselines shared by every process."""

    def __init__(
        self, baselines: RoleBaselines | None = None, *, enabled: bool = True, share: Share = local_only
    ) -> None:
        self.baselines = baselines if baselines is not None else RoleBaselines()
        self.enabled = enabled
        self.share = share

    def step(self, samples: Sequence[tuple[RoleKey, float]]) -> list[float]:
        """The advantage of each (key, return), in order; then the baselines take in every process's returns.

        With several processes, each calls ``step`` once per training step, even with no samples.

        >>> rae = RoleConditionedAdvantage()
        >>> rae.step([(("ttt", "X"), 1.0)])  # the baseline was 0; it becomes 0.05
        [1.0]
        >>> [round(a, 6) for a in rae.step([(("ttt", "X"), 1.0)])]
        [0.95]
        """
        before = {key: self.baselines.get(key) for key, _ in samples}
        advantages = [value - before[key] if self.enabled else value for key, value in samples]
        self.baselines.update(self.share(sum_returns(samples)))
        return advantages


def episode_samples(game: str, returns: Mapping[str, float]) -> list[tuple[RoleKey, float]]:
    """One (key, return) per role of a finished episode."""
    return [((game, role), value) for role, value in returns.items()]


def turn_advantages(turn_roles: Sequence[str], by_role: Mapping[str, float]) -> list[float]:
    """Each turn's advantage: that of the role which played it (every turn of a role shares one)."""
    return [by_role[role] for role in turn_roles]


@dataclass
class RoleAdvantage:
    """The seam's advantage function of self-play: each sample gets ``R - b`` of its (game, role), or ``R``.

    A rollout's ``groups`` are (game, role) keys. ``one_return_per`` says what brings one return to a baseline:
    ``"game"``, one per role and game however many turns the role played (``extra["episode"]`` names each
    turn's game, and every turn of a role in a game gets that return's advantage); or ``"sample"``, every
    sample its own return, a masked one (None) getting 0 and leaving the baselines alone. ``roles``, when
    given, are the only keys a sample may have. The baselines are logged as ``rae/baseline/<game>/<role>``
    with the step: the trainer logs a rollout's metrics after it has its advantages.
    """

    rae: RoleConditionedAdvantage = field(default_factory=lambda: RoleConditionedAdvantage(share=all_gather_sums))
    one_return_per: Literal["game", "sample"] = "game"
    roles: Collection[RoleKey] | None = None

    @classmethod
    def create(cls, *, enabled: bool) -> Self:
        """RAE on (``enabled``) or off, with baselines shared across processes; the class's counting rule."""
        return cls(RoleConditionedAdvantage(enabled=enabled, share=all_gather_sums))

    def __call__(self, rollout: Rollout, context: TrainerContext) -> list[float]:
        keys = [self._key(group) for group in rollout.groups]
        per_game = self.one_return_per == "game"
        # a unit brings one return to its key's baseline: a role in a game, or a single sample
        units: list[Hashable] = [*zip(rollout.extra["episode"], keys, strict=True)] if per_game else [*range(len(keys))]
        returns: dict[Hashable, tuple[RoleKey, float]] = {}
        for unit, key, reward in zip(units, keys, rollout.rewards, strict=True):
            if reward is None and per_game:
                raise ValueError("a self-play turn has no return")  # a game's end gives every role its return
            if reward is not None:
                returns.setdefault(unit, (key, reward))
        # every process steps once a step, even with no returns: the share is a collective
        by_unit = dict(zip(returns, self.rae.step(list(returns.values())), strict=True))
        rollout.metrics.update(self.rae.baselines.metrics())
        return [by_unit.get(unit, 0.0) for unit in units]

    def _key(self, group: Hashable) -> RoleKey:
        if self.roles is not None and group not in self.roles:
            raise ValueError(f"a sample belongs to one of {sorted(self.roles)}, not {group!r}")
        return cast(RoleKey, group)
