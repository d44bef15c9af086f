"""The GRPO reward: every completion of a batch judged through the sandbox, one request per group.

It has TRL's reward-function shape, ``(prompts, completions, **kwargs) -> list[float | None]``, and is
async, so TRL awaits it on its event loop. The dataset's ``task_id`` column arrives as a keyword
argument and names each completion's task. A completion of a prompt that ends in an open code fence (a base
model's: ``prompts.base_prompt``) is judged as the block it continues, up to its close
(``prompts.continued_answer``), as ``codegym-eval`` reads it. A sandbox error gives ``None``: TRL masks that completion
(no reward, no advantage) instead of teaching the model that its program was wrong.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from codegym_evaluator.extract import extract_code
from codegym_evaluator.messages import completion_text
from codegym_evaluator.prompts import continued_answer
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task
from codegym_sandbox.verdicts import Verdict

from .schemes import execution_reward, tests_reward
from .verdict_rates import VerdictStats

log = logging.getLogger("codegym.trainer")

ScorerFactory = Callable[[], Scorer]


def answer_text(completion: Any) -> str:
    """The answer to score in a completion: the string itself, or the text of a conversation's last message
    (``codegym_evaluator.messages``, which every front door reads answers through)."""
    return completion_text(completion)


def _nth(prompts: Sequence[Any], i: int) -> Any:
    """The prompt of completion ``i``, or None where the call gave none."""
    return prompts[i] if i < len(prompts) else None


@dataclass
class BatchReport:
    """What the last batch looked like: the progress display and the logs read it."""

    rewards: list[float | None] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    stats: VerdictStats = field(default_factory=VerdictStats)

    @property
    def masked(self) -> int:
        return sum(1 for r in self.rewards if r is None)

    @property
    def pass_rate(self) -> float:
        judged = [v for v in self.verdicts if v is not Verdict.SE]
        return sum(1 for v in judged if v is Verdict.AC) / len(judged) if judged else 0.0


class SandboxReward:
    """Async reward function scoring completions of codegym tasks through the sandbox.

    A thin front door, as the evaluator's ``trl_reward.CodeReward`` is: both judge through
    :meth:`Scorer.score_group` (the evaluator's README sets their defaults side by side); this one knows the
    tasks by ``task_id`` and has the seeds' reward tables. ``scheme`` picks the table (see
    :mod:`codegym_trainer.rewards.schemes`; ``partial_credit`` pays the share of the tests passed that the prompt does
    not show); ``make_scorer`` builds a :class:`Scorer` (one per event loop,
    since its HTTP client belongs to the loop it first ran on).
    """

    __name__ = "sandbox"

    def __init__(
        self,
        tasks: Mapping[str, Task],
        make_scorer: ScorerFactory,
        *,
        scheme: Literal["tests", "execution"] = "tests",
        partial_credit: bool = False,
    ) -> None:
        self.tasks = dict(tasks)
        self.make_scorer = make_scorer
        self.scheme = scheme
        self.partial_credit = partial_credit
        self.last = BatchReport()
        self.masked_total = 0
        self._scorers: dict[int, Scorer] = {}
        self._seen_tests: dict[str, list[bool]] = {}

    def _seen(self, task_id: str) -> list[bool]:
        """Per test of the task, whether its prompt shows it (``Task.seen_tests``: its dataset's public tests, the
        examples it writes out), which partial credit leaves out; read once per task."""
        if task_id not in self._seen_tests:
            self._seen_tests[task_id] = self.tasks[task_id].seen_tests()
        return self._seen_tests[task_id]

    def _scorer(self) -> Scorer:
        key = id(asyncio.get_running_loop())
        if key not in self._scorers:
            self._scorers[key] = self.make_scorer()
        return self._scorers[key]

    async def aclose(self) -> None:
        """Close the scorer that belongs to the running loop."""
        scorer = self._scorers.pop(id(asyncio.get_running_loop()), None)
        if scorer is not None:
            await scorer.aclose()

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task_id: Sequence[str] | None = None,
        log_extra: Callable[[str, list[Any]], None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """One reward per completion, None where the sandbox failed."""
        if task_id is None:
            raise ValueError("the training dataset needs a 'task_id' column naming each prompt's task")
        # A base model's prompt ends in an open fence: its completion is judged as the block it continues.
        texts = [continued_answer(_nth(prompts, i), answer_text(c)) for i, c in enumerate(completions)]
        if self.scheme == "tests":
            rewards, verdicts, details = await self._tests(texts, task_id)
        else:
            rewards, verdicts, details = await self._execution(texts, task_id)
        self._report(rewards, verdicts, log_metric)
        if log_extra is not None:
            log_extra("verdict", verdicts)
            log_extra("tests", details)
        return rewards

    async def _tests(
        self, texts: list[str], task_ids: Sequence[str]
    ) -> tuple[list[float | None], list[Verdict], list[str]]:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, tid in enumerate(task_ids):
            if tid not in self.tasks:
                raise KeyError(f"completion {i} names task {tid!r}, which the reward does not know")
            groups[tid].append(i)
        scorer = self._scorer()
        results = await asyncio.gather(
            *(scorer.score_group(self.tasks[tid], [texts[i] for i in idx]) for tid, idx in groups.items())
        )
        scores: list[Score | None] = [None] * len(texts)
        for idx, group_scores in zip(groups.values(), results, strict=True):
            for i, score in zip(idx, group_scores, strict=True):
                scores[i] = score
        done = [s for s in scores if s is not None]
        seen = [self._seen(tid) for tid in task_ids]
        rewards = [tests_reward(s, seen=v, partial_credit=self.partial_credit) for s, v in zip(done, seen, strict=True)]
        return rewards, [s.verdict for s in done], [f"{s.passed}/{s.total}" for s in done]

    async def _execution(
        self, texts: list[str], task_ids: Sequence[str]
    ) -> tuple[list[float | None], list[Verdict], list[str]]:
        # the whole program runs, as written: no sanitising for a function task, whose top-level lines count here
        codes = [extract_code(t).code for t in texts]
        runs = await self._scorer().execute_many(codes)
        rewards = [execution_reward(r) for r in runs]
        return rewards, [r.verdict for r in runs], [r.stdout[:200] for r in runs]

    def _report(
        self, rewards: list[float | None], verdicts: list[Verdict], log_metric: Callable[[str, float], None] | None
    ) -> None:
        stats = VerdictStats.of(verdicts)
        self.last = BatchReport(rewards, verdicts, stats)
        masked = self.last.masked
        self.masked_total += masked
        if log_metric is not None:
            for name, rate in stats.rates().items():
                log_metric(name, rate)
            log_metric("rewards/masked", masked / len(rewards) if rewards else 0.0)
        if rewards and masked == len(rewards):
            log.error(
                "SANDBOX UNAVAILABLE: all %d rewards of this step are masked (no learning signal this step); "
                "check the sandbox at %s",
                masked,
                ", ".join(getattr(s, "urls", ["?"])[0] for s in self._scorers.values()) or "?",
            )
        elif masked:
            log.warning("sandbox errors: %d of %d rewards masked this step", masked, len(rewards))
