"""The result cache: keys, LRU eviction, and hits seen through the API."""

from __future__ import annotations

from codegym_sandbox.cache import LRUCache, cache_key
from fastapi.testclient import TestClient


def test_key_depends_on_every_part() -> None:
    base = cache_key("rt", "python", b"print(1)", 1.0)
    assert base == cache_key("rt", "python", b"print(1)", 1.0)
    assert base != cache_key("rt", "python", b"print(2)", 1.0)
    assert base != cache_key("rt", "python", b"print(1)", 2.0)
    assert base != cache_key("rt", "cpp", b"print(1)", 1.0)
    # Boundaries between parts matter: the same bytes split differently are another key.
    assert cache_key(b"ab", b"c") != cache_key(b"a", b"bc")
    assert cache_key([("f", (b"x", 0o644))]) != cache_key([("f", (b"y", 0o644))])


def test_lru_evicts_least_recently_used() -> None:
    cache: LRUCache[int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses) == (3, 1)


def test_put_refreshes_and_overwrites() -> None:
    cache: LRUCache[str] = LRUCache(2)
    cache.put("a", "old")
    cache.put("b", "b")
    cache.put("a", "new")
    cache.put("c", "c")
    assert cache.get("a") == "new" and cache.get("b") is None


def test_zero_entries_disables_the_cache() -> None:
    cache: LRUCache[int] = LRUCache(0)
    cache.put("a", 1)
    assert len(cache) == 0 and cache.get("a") is None


def test_second_identical_run_is_cached(client: TestClient) -> None:
    req = {"language": "python", "code": "import random; print(random.random() < 2)"}
    first = client.post("/v1/execute", json=req).json()
    again = client.post("/v1/execute", json=req).json()
    assert first["run"]["cached"] is False
    assert again["run"]["cached"] is True and again["verdict"] == "AC" and again["run"]["stdout"] == "True\n"
    other = client.post("/v1/execute", json={**req, "stdin": "different input"}).json()
    assert other["run"]["cached"] is False


def test_timeouts_are_not_cached(client: TestClient) -> None:
    req = {"language": "python", "code": "import time; time.sleep(5)", "limits": {"timeout_s": 0.3}}
    assert client.post("/v1/execute", json=req).json()["verdict"] == "TLE"
    again = client.post("/v1/execute", json=req).json()
    assert again["verdict"] == "TLE" and again["run"]["cached"] is False


def _counter(client: TestClient, sample: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


RUNS = 'codegym_sandbox_run_seconds_count{kind="run",language="python"}'
HITS = 'codegym_sandbox_cache_total{result="hit"}'


def test_repeated_run_code_body_is_answered_without_a_run(client: TestClient) -> None:
    body = b'{"code": "import random; print(random.random())", "language": "python"}'
    headers = {"content-type": "application/json"}
    answers = client.app.state.executor.responses  # type: ignore[attr-defined]
    stored = len(answers)
    first = client.post("/run_code", content=body, headers=headers)
    assert len(answers) == stored + 1
    runs, hits = _counter(client, RUNS), _counter(client, HITS)
    again = client.post("/run_code", content=body, headers=headers)
    assert first.status_code == again.status_code == 200 and first.json()["status"] == "Success"
    assert again.content == first.content  # the same random number: it did not run again
    assert _counter(client, RUNS) == runs and _counter(client, HITS) == hits + 1
    # The same request spelled differently misses the answer cache but still hits the step cache.
    spaced = client.post("/run_code", content=body.replace(b": ", b":"), headers=headers)
    assert spaced.json()["run_result"]["stdout"] == first.json()["run_result"]["stdout"]
    assert _counter(client, RUNS) == runs
    other = client.post("/run_code", json={"code": "print(input())", "language": "python", "stdin": "a"}).json()
    assert other["run_result"]["stdout"] == "a\n"
    other = client.post("/run_code", json={"code": "print(input())", "language": "python", "stdin": "b"}).json()
    assert other["run_result"]["stdout"] == "b\n"


def test_run_code_timeouts_and_bad_requests_are_not_cached(client: TestClient) -> None:
    req = {"code": "import time; time.sleep(5)", "language": "python", "run_timeout": 0.3}
    answers = client.app.state.executor.responses  # type: ignore[attr-defined]
    stored = len(answers)
    assert client.post("/run_code", json=req).json()["run_result"]["status"] == "TimeLimitExceeded"
    runs = _counter(client, RUNS)
    assert client.post("/run_code", json=req).json()["run_result"]["status"] == "TimeLimitExceeded"
    assert _counter(client, RUNS) == runs + 1
    for _ in range(2):
        assert client.post("/run_code", json={"code": "1", "language": "cobol"}).status_code == 422
    assert len(answers) == stored
