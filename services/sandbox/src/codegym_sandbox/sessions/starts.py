"""How fast one client may have sessions started.

A session's create starts a worker of its own, and on docker and podman that is a container's start: the engine's
daemon, the runtime and the agent's interpreter take about 0.4 s of the host's CPU, outside every run's and
session's account. A client that made and deleted sessions in a loop (never running a cell, always within its caps
on sessions held) took the host's CPUs from every other client's runs: three times their wall time on two CPUs.

Each client has a bucket of starts: ``burst`` at once (the sessions it may hold: a GRPO batch's groups made
together start at once), refilled at ``per_s`` a second; a create that finds it empty is refused
(:class:`StartsTooFast`, 429 with the seconds until the next start is due), before anything of it starts. A
create refused by another cap takes no start; one whose worker fails to start took one (it cost the host as much).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from ..config import Sessions
from .errors import StartsTooFast

_KEPT = 4096  # clients whose buckets are kept before the full ones are forgotten (a full one is a new client's)


def starts_per_s(setting: float, containers: bool, cpus: int | None = None) -> float | None:
    """The starts a second one client may have: ``setting``; where 0, on the container backends a quarter of the
    CPUs' count (about 0.4 s of CPU each: a tenth of the CPUs at most), and on the local backend no bound (None: a
    start there is a process's, a few tens of ms of CPU)."""
    if setting:
        return setting
    return (cpus or len(os.sched_getaffinity(0))) / 4 if containers else None


class StartRate:
    """Each client's bucket of session starts (``burst`` at once, ``per_s`` refilled a second; None: no bound)."""

    def __init__(self, per_s: float | None, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_s, self.burst, self.clock = per_s, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (starts left, when counted)

    @classmethod
    def of(cls, settings: Sessions, containers: bool) -> StartRate:
        """The server's: ``SESSIONS__CLIENT_STARTS_PER_S`` beyond a burst of ``SESSIONS__MAX_SESSIONS_PER_CLIENT``
        (the sessions a client may hold, made at once)."""
        return cls(starts_per_s(settings.client_starts_per_s, containers), settings.max_sessions_per_client)

    def take(self, client: str) -> None:
        """Count a start of ``client``'s, or refuse it (:class:`StartsTooFast`) where its bucket is empty."""
        if self.per_s is None:
            return
        now = self.clock()
        left = self._left(client, now)
        if left < 1:
            wait_s = math.ceil((1 - left) / self.per_s)
            raise StartsTooFast(
                f"{client} has sessions started faster than {self.per_s:g} a second beyond {self.burst} at once "
                f"(SESSIONS__CLIENT_STARTS_PER_S): the next in {wait_s} s",
                wait_s,
            )
        if len(self._buckets) >= _KEPT:
            self._buckets = {c: b for c, b in self._buckets.items() if self._left(c, now) < self.burst}
        self._buckets[client] = (left - 1, now)

    def _left(self, client: str, now: float) -> float:
        left, at = self._buckets.get(client, (float(self.burst), now))
        return min(float(self.burst), left + (now - at) * (self.per_s or 0.0))
