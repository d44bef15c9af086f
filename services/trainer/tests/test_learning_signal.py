"""Slow: GRPO moves an easy reward upwards, over two seeds (bench/learning_signal.py runs three)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from codegym_evaluator.servers import LoopbackServer

BENCH = Path(__file__).resolve().parents[3] / "bench" / "learning_signal.py"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_mean_reward_rises(seed: int, tmp_path: Path, sandbox_process: LoopbackServer) -> None:
    spec = importlib.util.spec_from_file_location("learning_signal", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    result = bench.learning_run(seed, steps=40, window=5, sandbox_url=sandbox_process.url, workdir=tmp_path)
    assert result.last - result.first >= 0.3, (result.first, result.last)
