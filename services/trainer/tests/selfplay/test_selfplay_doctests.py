"""The examples in the self-play modules' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "games.base",
    "advantage",
    "code_game.program_check",
    "code_game.rules",
    "code_game.output_prediction",
    "spiral.rollout",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"codegym_trainer.selfplay.{name}")
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0
