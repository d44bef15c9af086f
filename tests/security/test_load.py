"""The load test, short: a real server at and above capacity with hostile programs, and with workers killed.

``bench/load_bench.py`` does the work and checks everything (each request answered once and right, only
429/503 with Retry-After as errors, memory and descriptors flat, the pool whole at the end); here it runs
for 20 seconds instead of minutes.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

import httpx
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


def test_a_server_that_pushes_back_for_ever_fails_the_run_instead_of_hanging_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refused request is sent again after its Retry-After, but not without end: past its phase by
    ``GIVE_UP_AFTER_S`` it is counted wrong, so a pool that never heals fails the bench instead of hanging CI."""
    monkeypatch.setattr(load_bench, "GIVE_UP_AFTER_S", 0.3)
    sent: list[int] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        return httpx.Response(503, headers={"Retry-After": "1"}, json={"detail": "busy"})

    async def one_client() -> load_bench.Tally:
        tally = load_bench.Tally()
        async with httpx.AsyncClient(base_url="http://sandbox", transport=httpx.MockTransport(refuse)) as http:
            await asyncio.wait_for(
                load_bench._client(http, "overload", time.monotonic() + 0.05, random.Random(1), tally, False), 10
            )
        return tally

    tally = asyncio.run(one_client())
    assert len(sent) > 1, "a refused request must be sent again"
    assert tally.issued == 1 and [o.problem for o in tally.outcomes] == ["still 503 0 s after the phase ended"]
