"""The limits of one step (a compile or a run): clamped to the server's maxima, and where the server chose the
memory limit itself (its default, a compile's), fitted to its memory budget.

A run whose limit and what the server holds for it pass the whole budget can never start, and is refused (422).
That is the answer a request that asks for more than the budget should get, but not one that asked for nothing:
on a small budget (a 2 GiB container's default budget is 1 GiB) the default limit of 1 GiB and a compile's
limit refused every run of every language. So the limits the server picks are fitted within what the runs are
sure of (:func:`runs_room_mb`: the budget less what sessions may hold for their lives), beside what the server
holds for a step at most (:func:`held_mb`) and what the budget charges a step beyond its limit at most (a node,
JVM or compiler step, which no address-space limit bounds, is charged the supervisors' share too:
``backends/memory.run_limit_mb``); what a request asks for is not. Fitted within the whole budget, one idle
session made every run of the default limit wait for as long as it lived (round 56).
"""

from __future__ import annotations

from dataclasses import dataclass

from .agent.memory_cgroup import MemoryCgroup
from .agent.protocol import Limits
from .config import Settings

COMPILE_MEMORY_MB = 2048  # at least, for a compiler (where the server's largest run limit is less)
FITTED_MIN_MB = 32  # a budget that leaves less than this beside what it holds for a step fits nothing: 422


@dataclass(frozen=True)
class RunLimits:
    """Limits of one step, after clamping to the server's maxima."""

    wall_s: float
    memory_mb: int

    def agent_limits(self, settings: Settings, address_space: bool) -> Limits:
        lim = settings.limits
        return {
            "wall_s": self.wall_s,
            "cpu_s": self.wall_s,
            "memory_bytes": self.memory_mb << 20,
            "address_space_bytes": self.memory_mb << 20 if address_space else None,
            "processes": lim.processes,
            "file_size_bytes": lim.file_size_bytes,
            "open_files": lim.open_files,
            "output_bytes": lim.output_bytes,
            "collect_bytes": lim.file_size_bytes,
        }


def held_mb(settings: Settings) -> int:
    """What the server holds for one step at most beside its limit (MiB): an exchange's outputs, inputs and
    files (the schedule cuts a program's tests into exchanges that hold no more than this:
    ``judging/schedule.exchanges``), or one run's output and the files it fetches back (a compile's artifacts),
    and a MiB for what the kernel holds for its files (``backends/memory.server_held_mb`` charges each exactly).
    A single run's own inputs and files come on top: a request whose one test or program holds more than the
    room this leaves is refused, saying so."""
    lim = settings.limits
    most = max(settings.exchange_output_bytes, lim.output_bytes + lim.file_size_bytes)
    return -(-most >> 20) + 1


# What the budget charges a step beyond its limit at most: the supervisors' share, where no address-space limit
# bounds the step and its worker's memory cgroup holds it (``backends/memory.run_limit_mb``).
BEYOND_LIMIT_MB = MemoryCgroup.SUPERVISORS_BYTES >> 20


def runs_room_mb(settings: Settings, budget_mb: int) -> int:
    """What the runs are sure of in a budget of ``budget_mb``: all of it but what sessions may hold together
    (``SESSIONS__MEMORY_SHARE``, theirs for their lives, idle or not), where the server keeps sessions."""
    sessions = settings.sessions
    return budget_mb - (int(budget_mb * sessions.memory_share) if sessions.max_sessions else 0)


def fitted_mb(mb: int, settings: Settings, budget_mb: int) -> int:
    """``mb``, a memory limit the server chose, within what the runs are sure of (:func:`runs_room_mb`) beside
    :func:`held_mb` and :data:`BEYOND_LIMIT_MB`; where that leaves less than ``FITTED_MIN_MB`` (sessions may hold
    nearly all of it), within the whole budget (such a run may wait for sessions to end); else unchanged (the
    step is refused, saying why)."""
    beside = held_mb(settings) + BEYOND_LIMIT_MB
    for room in (runs_room_mb(settings, budget_mb) - beside, budget_mb - beside):
        if room >= FITTED_MIN_MB:
            return min(mb, room)
    return mb
