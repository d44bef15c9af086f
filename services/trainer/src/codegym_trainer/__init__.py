"""codegym's trainer: GRPO on code with TRL, rewarded by running programs in the codegym sandbox."""

from __future__ import annotations

import os

# OpenMP's threads spin while they wait for each other by default. On a CPU shared with other work (the
# sandbox's workers scoring the last batch, a second run), a spinning thread holds the core its partner
# needs, and torch's small matrix products then ran 10x slower on 2 cores (greedy generation of HumanEval
# answers: 81 s for 8 problems with spinning threads, 31 s without). libgomp reads this when it loads, so
# it is set here, before any module of this package imports torch; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .config import ConfigError, TrainConfig  # after the setting above

__all__ = ["ConfigError", "TrainConfig"]
