"""One whole differential run: the reference and every route on the corpus, against a server at ``url``."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .corpus import Item
from .reference import Outcome, judge_all
from .report import Row, reference_row, route_row
from .route_http import Verdict
from .routes import ROUTES


@dataclass
class Run:
    """What a run found: the reference's outcomes, each route's verdicts, and the seconds each took."""

    reference: dict[str, Outcome]
    verdicts: dict[str, dict[str, Verdict]]
    seconds: dict[str, float] = field(default_factory=dict)

    def rows(self, items: list[Item]) -> list[Row]:
        """The reference's row, then one row per route."""
        rows = [reference_row(items, self.reference)]
        return rows + [route_row(r, items, self.reference, v) for r, v in self.verdicts.items()]


def run(url: str, items: list[Item], routes: list[str] | None = None, workers: int | None = None) -> Run:
    """Judge ``items`` with the reference (``workers`` processes at a time) and, meanwhile, with each of
    ``routes`` (default: all) through the server at ``url``, one route after the other. The two overlap: the
    reference waits on its processes, the routes on the server."""
    seconds: dict[str, float] = {}

    def reference() -> dict[str, Outcome]:
        start = time.monotonic()
        outcomes = judge_all(items, workers)
        seconds["reference"] = time.monotonic() - start
        return outcomes

    with ThreadPoolExecutor(max_workers=1) as pool:
        outcomes = pool.submit(reference)
        verdicts: dict[str, dict[str, Verdict]] = {}
        for name in routes or list(ROUTES):
            start = time.monotonic()
            verdicts[name] = asyncio.run(ROUTES[name](url, items))
            seconds[name] = time.monotonic() - start
        return Run(outcomes.result(), verdicts, seconds)
