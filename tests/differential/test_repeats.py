"""Issue 31, family 9: a lucky answer is not remembered. Each item is TLE most of the time and answers right,
near its time limit, in every other window of ``WINDOW_S`` seconds (``families.repeat_items``: the stdin, call
and assert forms, Python and bash). It is judged twice with the routes' caches on, as their clients send by
default: in a window where it answers, then in one where it runs out of time. Each time every route that can
judge it must say what the reference says in the same window: right, then wrong. A route that remembered the
first answer would pass it the second time.
"""

from __future__ import annotations

import asyncio
import time

from .families import WINDOW_S, repeat_items
from .reference import Outcome, judge_all
from .route_http import Verdict
from .routes import ROUTES

CACHING = ("/v1/evaluate", "/run_code", "/submit", "CodeReward native", "CodeReward fusion", "Scorer")


def _wait_for(phase: int) -> None:
    """Sleep until a window of ``phase`` (0: the items answer; 1: they run out of time) has just begun."""
    now = time.time()
    window = int(now // WINDOW_S) + 1
    window += (window - phase) % 2
    time.sleep(window * WINDOW_S - now + 0.1)


async def _judge(url: str) -> tuple[dict[str, dict[str, Verdict]], dict[str, Outcome]]:
    """Every caching route and the reference on the items, all at once (within one window)."""
    items = repeat_items()
    routes = asyncio.gather(*(ROUTES[r](url, items) for r in CACHING))
    verdicts, truth = await asyncio.gather(routes, asyncio.to_thread(judge_all, items, len(items)))
    return dict(zip(CACHING, verdicts, strict=True)), truth


def test_a_lucky_answer_is_judged_again_not_remembered(sandbox_url: str) -> None:
    items = repeat_items()
    for phase in (0, 1):
        _wait_for(phase)
        started = time.time()
        verdicts, reference = asyncio.run(_judge(sandbox_url))
        # Every run started in the window (the items decide at their start): the round is what it says.
        assert time.time() - started < WINDOW_S - 1, "a round took longer than its window: a machine too slow"
        assert all(reference[i.id].passed is (phase == 0) for i in items), (phase, reference)
        judged = {route: {k: v for k, v in got.items()} for route, got in verdicts.items()}
        assert all(judged.values()), judged
        wrong = {route: got for route, got in judged.items() if any(v is not (phase == 0) for v in got.values())}
        assert not wrong, f"round {phase} ({'answers' if phase == 0 else 'runs out of time'}): {wrong}"
