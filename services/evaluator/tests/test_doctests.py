"""The examples in the library's docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["credit", "extract", "feedback", "passk", "sanitize", "tasks.model", "tasks.shown_tests"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"codegym_evaluator.{name}")
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0
