"""The trainer's own problems (codegym's JSONL task format), so a default run needs no dataset hub.

``train.jsonl``: simple function and stdin/stdout problems with tests, easy enough that a small model
solves some of them and a GRPO group sees different rewards. ``heldout.jsonl``: MBPP-style problems that
never appear in training, for pass@1 before, during and after training.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).parent
TRAIN_FILE = DATA_DIR / "train.jsonl"
HELDOUT_FILE = DATA_DIR / "heldout.jsonl"
