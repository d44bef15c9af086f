"""verl's and SkyRL's request patterns (``bench/rl_clients.py``) against a real server at default settings.

A hundred cases at once, with the clients' own timeouts and retry rules: every case must get its right
score. With a fixed pool of one worker per CPU, the sleepers of a case would queue behind each other
and run into the clients' timeouts (scored -1 by verl, an error by SkyRL); the pool lends workers
instead. The limit is 2 s rather than the clients' usual 10 s to keep the test short; SkyRL's margin (run
+ 2 s) is the same either way, and it is what the lending must beat. The server runs at its defaults, its
memory budget too: the clients send no memory limit, so each run may hold the default 1 GiB, and the budget
must admit runs by what they hold (a few MiB), not by that, for a hundred at once on a small machine.

SkyRL's sleepers go first, the moment the server says it is ready: on a small machine, workers started
while a hundred sleepers wait come seconds late, so start-up must have started them ahead (``/readyz``
waits for it). Later scenarios find the workers that earlier ones were lent.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import rl_clients  # the clients the benchmark runs
from load_bench import ServerProcess

CASES = 100
LIMIT_S = 2.0


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    env = {"CODEGYM_SANDBOX_BACKEND": "local"}
    server = ServerProcess(env, ["--log-level", "warning"]).start()
    try:
        yield server.url
    finally:
        server.stop()


SKYRL_SLEEPERS_FIRST = sorted(rl_clients.SCENARIOS, key=lambda s: s.name != "SkyRL, sleepers")


@pytest.mark.parametrize("scenario", SKYRL_SLEEPERS_FIRST, ids=lambda s: s.name)
def test_every_case_gets_its_score(url: str, scenario: rl_clients.Scenario) -> None:
    out = rl_clients.run_scenario(scenario, url, CASES, LIMIT_S)
    wrong = [s for s in out.scores if not (s == scenario.expect and type(s) is type(scenario.expect))]
    scored = sorted(set(map(str, wrong)))
    assert not wrong, f"{len(wrong)} of {CASES} cases scored {scored} (slowest {out.slowest_s:.1f} s)"


def test_a_case_the_server_cannot_take_in_time_is_refused_in_a_way_verl_retries() -> None:
    """With one worker and no lending, the second of two sleepers waits past FUSION_QUEUE_WAIT_S: 504,
    which verl's client retries until the worker is free, so the case still gets its score (-3)."""
    env = {
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_SANDBOX_WORKERS": "1",
        "CODEGYM_SANDBOX_MAX_WORKERS": "1",
        "CODEGYM_SANDBOX_FUSION_QUEUE_WAIT_S": "0.5",
    }
    server = ServerProcess(env, ["--log-level", "warning"]).start()
    try:
        out = rl_clients.run_cases(rl_clients.verl_case, server.url, rl_clients.sleepers(2, 1.0), 1.0, threads=2)
        assert out.scores == [-3, -3]
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'codegym_sandbox_requests_total{route="/run_code",status="504"}' in metrics
    finally:
        server.stop()
