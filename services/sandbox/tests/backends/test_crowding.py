"""Runs lent a worker while they slept, which then compute: no more of them compute at once than the CPUs
hold (``LEND_PER_CPU`` a CPU), the youngest stand paused and go on, never run again, and none is TLE for it (see
``lending.py``).

A real server on the local backend at its default pool (a worker per CPU, lent workers up to MAX_WORKERS).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from codegym_sandbox.backends.lending import CROWDED_AFTER_S, LEND_PER_CPU
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

# Sleeps, then computes a second of CPU; prints when it computed (wall-clock seconds): a span for each stretch in
# which it was never held off the CPUs for a tenth of a second (a run standing paused computes nothing).
NAPPER = """
import time
time.sleep(0.3)
spans, cpu = [], time.process_time()
began = last = time.time()
while time.process_time() - cpu < 1.0:
    now = time.time()
    if now - last > 0.1:
        spans.append((began, last))
        began = now
    last = now
spans.append((began, last))
print(" ".join(f"{b},{e}" for b, e in spans))
"""


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_sleepers_that_turn_to_compute_share_no_more_than_the_cpus_and_none_is_tle() -> None:
    """Sixteen programs that sleep 0.3 s, then compute 1 s, at a 2.5 s limit: all are lent a worker while they
    sleep. Computing all at once on two CPUs, each would wait 7 s for its second, past the credit (5 s): TLE.
    Those that stand paused go on later, counted as computing from then on; none is run again."""
    cpus = len(os.sched_getaffinity(0))
    n = 8 * cpus
    settings = Settings(backend="local", cache_entries=0, fusion_queue_wait_s=0)
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:  # the workers lending may add are started ahead
            assert time.monotonic() < deadline, "the server never got ready"
            time.sleep(0.1)
        req: dict[str, Any] = {"language": "python", "code": NAPPER, "run_timeout": 2.5}
        with ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda _: client.post("/run_code", json=req).json(), range(n)))
        status = client.get("/readyz").json()
    results = [a["run_result"] for a in answers]
    spans = [tuple(map(float, span.split(","))) for r in results for span in r["stdout"].split()]
    # They all wake at once, and compute for CROWDED_AFTER_S before any is seen to crowd the CPUs: counted after.
    after = min(b for b, _ in spans) + CROWDED_AFTER_S + 0.5
    most = _most_at_once([(max(b, after), e) for b, e in spans if e > after])
    assert most <= LEND_PER_CPU * cpus + 1, f"{most} computed at once on {cpus} CPUs"
    verdicts = sorted(r["status"] for r in results)
    assert verdicts == ["Finished"] * n, (verdicts, status)
    assert status["cpu_gave_way"] > 0 and status["restarts"] == 0, status
