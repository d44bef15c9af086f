"""Asking the sandbox again for runs that came back SE: the one policy of every route that judges through it.

An ``SE`` is the sandbox's own failure (a worker that died, a box that could not start), not the program's, so
the same request may well be judged the next time. Every route asks again by :class:`AskAgain`: the
``Scorer``'s groups (``score_group``: the evaluator, the trainer's ``SandboxReward``, ``CodeReward``, the data
tools) and its single runs (``execute_many``), and the code game's runs (``ProgramRunner``). Only the runs that
came back SE, or with an SE test (:func:`unjudged`), are asked again, ``retries`` times, after the backoff of the
client's :class:`RetryPolicy`; a sandbox that cannot be reached at all (a ``SandboxError``: the client has already
retried the request) is not asked again here, and every run still pending stays SE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from codegym_sandbox.client import RetryPolicy, SandboxError
from codegym_sandbox.verdicts import Verdict


class Judged(Protocol):
    """An answer for one run: a ``ProgramOut``, a ``RunOutput``."""

    @property
    def verdict(self) -> Verdict: ...


def unjudged(answer: Judged) -> bool:
    """Whether the sandbox failed ``answer``: its verdict is SE, or one of its tests' is (a test it could not run
    after another failed leaves the verdict that failure's, and the count short: ``Score.judged``)."""
    tests = getattr(answer, "tests", None) or ()
    return answer.verdict is Verdict.SE or any(getattr(test, "verdict", None) is Verdict.SE for test in tests)


K = TypeVar("K", bound=Hashable)  # what is asked for: a program, a request
A = TypeVar("A", bound=Judged)


@dataclass(frozen=True)
class AskAgain:
    """Which answers are asked for again, how many times, and after how long."""

    retry: RetryPolicy

    def again(self, attempt: int, answers: Sequence[Judged]) -> float | None:
        """Seconds to wait before asking again for the unjudged ones among ``answers`` (:func:`unjudged`; those of
        attempt ``attempt``, counted from 0), or None: the answers stand."""
        if attempt >= self.retry.retries or not any(unjudged(a) for a in answers):
            return None
        return self.retry.delay(attempt)

    async def each(
        self,
        keys: Sequence[K],
        ask: Callable[[list[K]], Awaitable[Sequence[A]]],
        unavailable: Callable[[SandboxError], A],
    ) -> dict[K, A]:
        """Every key's answer: ``ask`` answers the pending keys in order, asked again for those that came
        back SE; when it raises ``SandboxError``, the pending keys get ``unavailable(exc)``."""
        answers: dict[K, A] = {}
        pending = list(dict.fromkeys(keys))
        attempt = 0
        while pending:
            try:
                got = await ask(pending)
            except SandboxError as exc:
                answers.update(dict.fromkeys(pending, unavailable(exc)))
                break
            answers.update(zip(pending, got, strict=True))
            wait = self.again(attempt, got)
            if wait is None:
                break
            pending = [k for k, a in zip(pending, got, strict=True) if unjudged(a)]
            await asyncio.sleep(wait)
            attempt += 1
        return answers

    def one(self, ask: Callable[[], A], unavailable: Callable[[SandboxError], A]) -> A:
        """One run's answer, blocking: ``ask`` again while it comes back SE, as :meth:`each` does."""
        attempt = 0
        while True:
            try:
                answer = ask()
            except SandboxError as exc:
                return unavailable(exc)
            wait = self.again(attempt, [answer])
            if wait is None:
                return answer
            time.sleep(wait)
            attempt += 1
