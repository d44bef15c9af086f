"""bench/env_bench.py: a whole --quick run, tiny, against a real server, through the installed TRL's tool loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import env_bench


def test_quick_run_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    # The bench exits non-zero when a tool answers wrongly, a tool call fails in TRL's loop or a reward is not 1.0.
    assert env_bench.main(["--quick", "--requests", "3", "--batch", "2", "--gen-ms", "20"]) == 0
    out = capsys.readouterr().out
    assert "| trivial: `CodeEnvironment.run_python('1')` |" in out
    assert "| 10 tests: `CodeEnvironment.run_tests` of the same program |" in out
    assert "### A GRPO step: 2 rollouts x 4 tool rounds, 5 generation turns of 20 ms" in out
    assert "| of which 8 tool calls, one after another (" in out
    assert "| generation (simulated, 5 x 20 ms) | 0.1" in out  # five sleeps of 20 ms: what TRL's loop asked for
