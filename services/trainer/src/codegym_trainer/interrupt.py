"""Ctrl-C during training: finish the current step, write a checkpoint, stop cleanly. A second Ctrl-C aborts."""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

log = logging.getLogger("codegym.trainer")


class InterruptCheckpoint(TrainerCallback):
    """Turns the first SIGINT into "save a checkpoint and stop" at the end of the running step."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def install(self) -> None:
        self._previous = signal.signal(signal.SIGINT, self._handle)

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        log.warning("interrupted: writing a checkpoint after this step, then stopping (Ctrl-C again to abort)")

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control
