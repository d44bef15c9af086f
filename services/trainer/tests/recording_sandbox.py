"""A run's sandbox that records the clients made from it: the stand-in for ``TrainerContext.sandbox`` in the
tests' scripted contexts, to show that a rollout reaches the sandbox through the seam and no other way."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from codegym_evaluator.scoring import Scorer
from codegym_sandbox.client import SandboxClient
from codegym_trainer.sandbox import RunSandbox


@dataclass(frozen=True)
class RecordingSandbox(RunSandbox):
    """A :class:`RunSandbox` whose ``made`` lists each client it made (``"scorer"``, ``"client"``), in order."""

    made: list[str] = field(default_factory=list, compare=False)

    def scorer(self) -> Scorer:
        self.made.append("scorer")
        return super().scorer()

    def client(self, run_timeout_s: float, *, transport: httpx.BaseTransport | None = None) -> SandboxClient:
        self.made.append("client")
        return super().client(run_timeout_s, transport=transport)
