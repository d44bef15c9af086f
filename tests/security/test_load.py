"""The load test, short: a real server at and above capacity with hostile programs, and with workers killed.

``bench/load_bench.py`` does the work and checks everything (each request answered once and right, only
429/503 with Retry-After as errors, memory and descriptors flat, the pool whole at the end); here it runs
for 20 seconds instead of minutes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import load_bench


@pytest.mark.slow
def test_load_at_and_above_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code = load_bench.main(["--duration", "20", "--workers", "2", "--queue-size", "8"])
    report = capsys.readouterr().out
    assert code == 0, report
    assert "PASS every request answered exactly once" in report and "x 503" in report, report


@pytest.mark.slow
def test_workers_killed_at_random_during_load(capsys: pytest.CaptureFixture[str]) -> None:
    """Each kill costs at most the run it interrupted (a SandboxError); the pool heals without a restart."""
    code = load_bench.main(["--duration", "16", "--kill-every", "1.5", "--seed", "11"])
    report = capsys.readouterr().out
    assert code == 0, report
    assert "PASS sandbox errors only from killed workers" in report and " 0 workers killed" not in report, report
