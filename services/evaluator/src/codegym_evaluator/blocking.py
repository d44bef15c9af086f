"""A blocking face of ``Scorer`` for synchronous callers (TRL reward functions, scripts).

It owns one event loop on a background thread for its whole life, so the async client's connection pool
and limits are reused across calls instead of being rebuilt by an ``asyncio.run`` per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from .scoring import RunOutput, Score, Scorer
from .tasks import Task

T = TypeVar("T")


class BlockingScorer:
    """``Scorer`` with blocking methods; takes the same arguments. Use as a context manager or ``close()``."""

    def __init__(self, sandbox_url: str | Sequence[str], **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="codegym-scorer", daemon=True)
        self._thread.start()
        self.scorer: Scorer = self._call(self._make(sandbox_url, kwargs))

    @staticmethod
    async def _make(sandbox_url: str | Sequence[str], kwargs: dict[str, Any]) -> Scorer:
        return Scorer(sandbox_url, **kwargs)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self._thread.is_alive():
            coro.close()
            raise RuntimeError("this BlockingScorer is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def score_group(self, task: Task, completions: list[str], *, extract: bool = True) -> list[Score]:
        """``Scorer.score_group``, blocking."""
        return self._call(self.scorer.score_group(task, completions, extract=extract))

    def score_groups(self, groups: Sequence[tuple[Task, list[str]]], *, extract: bool = True) -> list[list[Score]]:
        """Several groups at once (concurrently, within the scorer's limits), in the order given."""

        async def all_groups() -> list[list[Score]]:
            return list(await asyncio.gather(*(self.scorer.score_group(t, c, extract=extract) for t, c in groups)))

        return self._call(all_groups())

    def execute_many(self, codes: list[str], language: str = "python") -> list[RunOutput]:
        """``Scorer.execute_many``, blocking."""
        return self._call(self.scorer.execute_many(codes, language))

    def close(self) -> None:
        if self._thread.is_alive():
            self._call(self.scorer.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> BlockingScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
