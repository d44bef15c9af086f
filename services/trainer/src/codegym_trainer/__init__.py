"""codegym's trainer: GRPO on code with TRL, rewarded by running programs in the codegym sandbox."""

from __future__ import annotations

from .config import ConfigError, TrainConfig

__all__ = ["ConfigError", "TrainConfig"]
