"""Why each worker's run stands paused: for the memory budget (``memory.py``), for the CPUs (``lending.py``), or
both. One ``pause`` frame goes to the agent as the first reason comes, one ``resume`` as the last goes: a run
paused for both is never continued by one of them while the other still holds it (``agent/run_pause.py``)."""

from __future__ import annotations

from typing import Literal

from .lending import LEND_PER_CPU, DemandMeter
from .worker import AgentWorker

Reason = Literal["memory", "cpus"]


class RunPauses:
    def __init__(self) -> None:
        self._why: dict[AgentWorker, set[Reason]] = {}
        self.stood: dict[AgentWorker, None] = {}  # lent workers whose run stands paused for the CPUs, oldest first

    def crowded(self, worker: AgentWorker) -> None:
        """``worker``'s run, lent as a sleeper, computes past what the CPUs hold: it stands paused for them."""
        self.stood[worker] = None
        self.hold(worker, "cpus", True)

    def go_on(self, known: float, cpus: int, meter: DemandMeter) -> float:
        """Lent runs that stand paused for the CPUs go on, oldest first, while the runs measured computing
        (``known``) leave room for one more each within ``LEND_PER_CPU`` a CPU: each counted as computing from
        then on (it never stands paused for them again). What the runs then want."""
        for worker in list(self.stood):
            if known + 1 > LEND_PER_CPU * cpus:
                break
            del self.stood[worker]
            self.hold(worker, "cpus", False)
            meter.computing(worker)
            known += 1
        return known

    def hold(self, worker: AgentWorker, reason: Reason, paused: bool) -> None:
        """``worker``'s run stands paused for ``reason`` (``paused``), or no longer."""
        why = self._why.setdefault(worker, set())
        before = bool(why)
        if paused:
            why.add(reason)
        else:
            why.discard(reason)
        if bool(why) != before:
            worker.pause(bool(why))
        if not why:
            del self._why[worker]

    def ended(self, worker: AgentWorker) -> None:
        """``worker``'s run ended: nothing holds it."""
        self._why.pop(worker, None)
        self.stood.pop(worker, None)
