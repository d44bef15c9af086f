"""The result cache: keys, LRU eviction by entries and by bytes, and hits seen through the API."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from codegym_sandbox import cache as cache_module
from codegym_sandbox import loop_turns
from codegym_sandbox.cache import ENTRY_BYTES, LARGEST_SHARE, LRUCache, cache_key
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import metric, run_code, settings_for

T = TypeVar("T")


def _entries(max_entries: int) -> LRUCache[object]:
    """A cache bounded by entries only: values cost nothing but their entry."""
    return LRUCache(max_entries, 1 << 30, lambda _: 0)


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
    cache = _entries(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses) == (3, 1)


def test_put_refreshes_and_overwrites() -> None:
    cache = _entries(2)
    cache.put("a", "old")
    cache.put("b", "b")
    cache.put("a", "new")
    cache.put("c", "c")
    assert cache.get("a") == "new" and cache.get("b") is None


def test_zero_entries_disables_the_cache() -> None:
    for cache in (_entries(0), LRUCache(16, 0, lambda _: 0)):
        cache.put("a", 1)
        assert len(cache) == 0 and cache.get("a") is None and cache.nbytes == 0


def test_lru_is_bounded_by_bytes() -> None:
    bound = 64 << 10
    cache: LRUCache[bytes] = LRUCache(1000, bound, len)
    for i in range(100):
        cache.put(f"k{i}", bytes(3000))
        assert cache.nbytes <= bound
    assert cache.nbytes == len(cache) * (3000 + ENTRY_BYTES) and 15 < len(cache) < 25
    assert cache.get("k99") is not None and cache.get("k0") is None  # the oldest went first
    # A value larger than its share is not kept, and pushes nothing out.
    held = len(cache)
    cache.put("huge", bytes(bound // LARGEST_SHARE))
    assert cache.get("huge") is None and len(cache) == held and cache.get("k99") is not None
    # A key put again is counted once.
    cache.put("k99", b"small")
    assert cache.nbytes == (len(cache) - 1) * (3000 + ENTRY_BYTES) + 5 + ENTRY_BYTES


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


# Spends about SPIN_S of CPU (where the time limit is LIMIT_S), then ends as ``{tail}`` says.
SPIN_S, LIMIT_S = 1.3, 2.0
SPIN = "import time\nend = time.process_time() + {spin}\nwhile time.process_time() < end:\n    pass\n{tail}\n"


def test_a_run_near_its_time_limit_is_not_cached(client: TestClient) -> None:
    """Past half its time limit a run may be TLE next time: whatever it ended with is not remembered."""
    limits = {"timeout_s": LIMIT_S}
    for tail in ("print('done')", "raise SystemExit(1)", "print('wrong')"):
        req = {"language": "python", "code": SPIN.format(spin=SPIN_S, tail=tail), "limits": limits}
        first = client.post("/v1/execute", json=req).json()
        again = client.post("/v1/execute", json=req).json()
        assert first["run"]["cpu_s"] >= 0.5 * LIMIT_S and again["run"]["cached"] is False, (tail, first, again)
    # Far from the limit, the same program is remembered.
    req = {"language": "python", "code": SPIN.format(spin=0.01, tail="print('done')"), "limits": limits}
    assert [client.post("/v1/execute", json=req).json()["run"]["cached"] for _ in range(2)] == [False, True]


def test_a_test_near_its_time_limit_is_not_cached_beside_fast_ones(client: TestClient) -> None:
    code = SPIN.format(spin=f"{SPIN_S} * (input() == 'slow')", tail="print('done')")
    tests = [{"stdin": f"{word}\n", "expected_stdout": "done\n"} for word in ("slow", "fast", "quick")]
    body = {"language": "python", "programs": [code], "tests": tests, "limits": {"timeout_s": LIMIT_S}}
    assert client.post("/v1/evaluate", json=body).status_code == 200
    runs = _counter(client, RUNS)
    again = client.post("/v1/evaluate", json=body).json()["results"][0]
    assert [t["verdict"] for t in again["tests"]] == ["AC"] * 3, again
    assert _counter(client, RUNS) == runs + 1  # the slow test ran again; the fast ones came from the cache


def test_a_run_code_answer_near_its_time_limit_is_not_cached(fusion_cached: TestClient) -> None:
    client = fusion_cached
    answers = client.app.state.executor.responses  # type: ignore[attr-defined]
    stored = len(answers)
    req = {"code": SPIN.format(spin=SPIN_S, tail="print('done')"), "language": "python", "run_timeout": LIMIT_S}
    for _ in range(2):
        assert client.post("/run_code", json=req).json()["run_result"]["stdout"] == "done\n"
    assert len(answers) == stored


def _counter(client: TestClient, sample: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


RUNS = 'codegym_sandbox_run_seconds_count{kind="run",language="python"}'
HITS = 'codegym_sandbox_cache_total{result="hit"}'


@pytest.fixture(scope="module")
def fusion_cached(backend: str) -> Iterator[TestClient]:
    """A server told to answer repeated /run_code requests from its cache (FUSION_CACHE)."""
    with TestClient(create_app(settings_for(backend, fusion_cache=True))) as c:
        yield c


RANDOM = "import random, time\nprint(random.random(), time.time_ns())\n"


def test_run_code_runs_every_request_by_default(client: TestClient) -> None:
    # As upstream: a program that prints a random number or the time gets a new answer every time.
    answers = client.app.state.executor.responses  # type: ignore[attr-defined]
    runs, stored = _counter(client, RUNS), len(answers)
    outs = [run_code(client, RANDOM)["run_result"]["stdout"] for _ in range(3)]
    assert len(set(outs)) == 3, outs
    assert _counter(client, RUNS) == runs + 3 and len(answers) == stored


def test_native_requests_can_ask_not_to_be_cached(client: TestClient) -> None:
    body = {"language": "python", "code": RANDOM, "cache": False}
    outs = [client.post("/v1/execute", json=body).json()["run"] for _ in range(2)]
    assert [o["cached"] for o in outs] == [False, False] and outs[0]["stdout"] != outs[1]["stdout"]
    cached = [client.post("/v1/execute", json={**body, "cache": True}).json()["run"] for _ in range(2)]
    assert [o["cached"] for o in cached] == [False, True] and cached[0]["stdout"] == cached[1]["stdout"]
    group = {
        "language": "python",
        "programs": [RANDOM + "# a group"],
        "tests": [{"stdin": "", "expected_stdout": ""}] * 2,
    }
    for cache, new_runs in ((True, 2), (True, 0), (False, 2), (False, 2)):
        runs = _counter(client, RUNS)
        assert client.post("/v1/evaluate", json={**group, "cache": cache}).status_code == 200
        assert _counter(client, RUNS) == runs + new_runs, cache
    runs = _counter(client, RUNS)
    batch = {"requests": [{**group, "cache": False}, {**group, "programs": ["print(1)"]}]}
    assert client.post("/v1/evaluate/batch", json=batch).status_code == 200
    assert _counter(client, RUNS) == runs + 4  # one group that may not be cached: none of the batch is


def test_repeated_run_code_body_is_answered_without_a_run(fusion_cached: TestClient) -> None:
    client = fusion_cached
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


def test_run_code_timeouts_and_bad_requests_are_not_cached(fusion_cached: TestClient) -> None:
    client = fusion_cached
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


STEPS_BYTES = 'codegym_sandbox_cache_bytes{store="steps"}'
STEPS_ENTRIES = 'codegym_sandbox_cache_entries{store="steps"}'
ANSWERS_BYTES = 'codegym_sandbox_cache_bytes{store="answers"}'
# Prints its input, then as many bytes as the input's second word says.
PRINTER = "a, n = input().split()\nprint(a)\nprint('x' * int(n))\n"


def test_many_large_outputs_stay_within_the_byte_bound(backend: str) -> None:
    """Many large outputs (forty in one request) never take the cache past its byte bound, which /metrics
    reports: outputs over their share are not kept at all, the others evict the least recently used."""
    bound = 4 << 20  # 3 MiB for steps (results of at most 192 KiB), 1 MiB for whole answers (64 KiB)
    with TestClient(create_app(settings_for(backend, cache_bytes=bound, fusion_cache=True))) as client:
        executor = client.app.state.executor  # type: ignore[attr-defined]
        steps_bound = bound - bound // 4

        def evaluate(tag: str, tests: int, size: int) -> None:
            cases = [{"stdin": f"{tag}{i} {size}", "expected_stdout": f"{tag}{i}\n"} for i in range(tests)]
            req = {"language": "python", "programs": [PRINTER], "tests": cases}
            r = client.post("/v1/evaluate", json=req)
            assert r.status_code == 200 and r.json()["results"][0]["total"] == tests, r.text
            held = metric(client, STEPS_BYTES)
            assert held == executor.cache.nbytes <= steps_bound
            assert metric(client, STEPS_ENTRIES) == len(executor.cache)

        small = {"code": "print('small')", "language": "python"}
        assert client.post("/v1/execute", json=small).json()["run"]["cached"] is False
        assert metric(client, STEPS_ENTRIES) == 1
        held = metric(client, STEPS_BYTES)
        # Forty outputs of 1 MiB, each over its share of the bound: none is kept, and none pushes out others.
        evaluate("huge", 40, 1 << 20)
        assert metric(client, STEPS_BYTES) == held and metric(client, STEPS_ENTRIES) == 1
        assert client.post("/v1/execute", json=small).json()["run"]["cached"] is True  # the small entry hits
        # Forty outputs of 120 KiB (4.7 MiB in all): kept up to the bound, the least recently used evicted
        # first (the small entry among them).
        evaluate("big", 40, 120 << 10)
        assert 15 < len(executor.cache) < 40 and metric(client, STEPS_BYTES) > steps_bound - (130 << 10)
        assert client.post("/v1/execute", json=small).json()["run"]["cached"] is False
        # Whole /run_code answers have their own share: a small one is kept, one over its share is not.
        assert client.post("/run_code", json=small).status_code == 200
        answers = metric(client, ANSWERS_BYTES)
        assert 0 < answers == executor.responses.nbytes <= bound // 4
        client.post("/run_code", json={"code": PRINTER, "language": "python", "stdin": f"big38 {120 << 10}"})
        assert metric(client, ANSWERS_BYTES) == answers


@pytest.mark.parametrize("cache", [False, True])
def test_a_shared_stdin_is_hashed_once_a_request_and_only_for_the_cache(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, cache: bool
) -> None:
    """A 16 MiB stdin hashed for the key of each of 60 programs, the cache off too, held the event loop a
    second: it is hashed once for all of a request's programs, and not at all when the request asks for no
    cache."""
    hashed = [0]
    real = cache_module.hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        hashed[0] += len(data)
        h = real(data)
        return _Counted(h, hashed)

    monkeypatch.setattr(cache_module.hashlib, "sha256", counting)
    stdin = "x" * (1 << 20)
    body = {
        "language": "python",
        "programs": [f"import sys; sys.stdin.read()  # {k}" for k in range(4)],
        "tests": [{"stdin": stdin, "expected_stdout": ""}],
        "cache": cache,
    }
    answer = client.post("/v1/evaluate", json=body)
    assert answer.status_code == 200 and [p["verdict"] for p in answer.json()["results"]] == ["AC"] * 4
    assert hashed[0] < (2 << 20 if cache else 1 << 20), hashed[0]


class _Counted:
    """A hash that counts the bytes it is given."""

    def __init__(self, h: Any, hashed: list[int]) -> None:
        self.h, self.hashed = h, hashed

    def update(self, data: bytes) -> None:
        self.hashed[0] += len(data)
        self.h.update(data)

    def hexdigest(self) -> str:
        return str(self.h.hexdigest())


def test_a_programs_files_are_hashed_once_for_all_its_tests(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 57: each test's key hashed the program's files again, on the event loop: a 4 MiB program of 20,000
    tests held it 46 s. They are hashed once for the program's tests."""
    hashed = [0]
    real = cache_module.hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        hashed[0] += len(data)
        return _Counted(real(data), hashed)

    monkeypatch.setattr(cache_module.hashlib, "sha256", counting)
    program = "print(input())\n#" + "x" * (256 << 10) + "\n"
    tests = [{"stdin": f"{k}\n", "expected_stdout": f"{k}\n"} for k in range(40)]
    answer = client.post("/v1/evaluate", json={"language": "python", "programs": [program], "tests": tests})
    assert answer.status_code == 200 and answer.json()["results"][0]["verdict"] == "AC", answer.text
    assert hashed[0] < 8 * len(program), hashed[0]  # 40 times over before


async def _longest_stretch(count: Callable[[], int], work: Awaitable[T]) -> tuple[T, int]:
    """``work``'s result, and the most that ``count`` grew between two turns of another client's on the loop."""
    longest, done = 0, False

    async def other_client() -> None:
        nonlocal longest
        last = count()
        while not done:
            longest, last = max(longest, count() - last), count()
            await asyncio.sleep(0)

    ticking = asyncio.create_task(other_client())
    await asyncio.sleep(0)
    result = await work
    done = True
    await ticking
    return result, longest


def test_a_request_of_cached_runs_gives_the_loop_its_turns(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 60: once a program's run was cached, a request of 262,144 such tests had nothing to wait for, and was
    keyed and judged in one stretch of the event loop (10 s of every other client's requests): others' work runs
    between slices of ``loop_turns.TURN`` tests, tests of one program or one test of many."""
    from codegym_sandbox.backends.base import RunPolicy
    from codegym_sandbox.judging import judge
    from codegym_sandbox.judging.schedule import judge_requests
    from codegym_sandbox.models import EvaluateRequest

    judged = 0
    real = judge.test_out

    async def counted(*args: Any) -> Any:
        nonlocal judged
        judged += 1
        return await real(*args)

    monkeypatch.setattr(judge, "test_out", counted)
    n = 16 * loop_turns.TURN
    stdio = {
        "language": "python",
        "programs": ["print(1)"],
        "tests": [{"stdin": "", "expected_stdout": "1\n"}],
        "early_stop": False,
    }
    asserts = {"language": "python", "programs": ["def f():\n    return 1\n"], "tests": [{"assert_code": "assert f()"}]}
    executor = client.app.state.executor  # type: ignore[attr-defined]

    async def longest_stretch(body: dict[str, Any], copies: int = 1) -> int:
        """The most tests judged between two turns of another client's, ``copies`` of the request in one batch."""
        request = EvaluateRequest.model_validate(body)
        results, longest = await _longest_stretch(
            lambda: judged, judge_requests(executor, [request] * copies, RunPolicy())
        )
        assert all(p.verdict.value == "AC" for programs in results for p in programs), results[0][0]
        return longest

    assert client.portal is not None
    client.portal.call(longest_stretch, stdio)  # now cached
    assert client.portal.call(longest_stretch, {**stdio, "tests": stdio["tests"] * n}) <= loop_turns.TURN
    client.portal.call(longest_stretch, asserts)
    # One test of many programs: exchanges judged side by side, each giving the loop back as it goes.
    assert client.portal.call(longest_stretch, {**asserts, "programs": asserts["programs"] * n}) <= 2 * loop_turns.TURN
    # Round 61: as many requests of one test in a batch, each counting its turns alone.
    assert client.portal.call(longest_stretch, stdio, n) <= 2 * loop_turns.TURN


def test_a_batch_answer_of_many_requests_is_made_between_turns(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 61: a batch of 262,144 requests whose runs were cached had its answer made in one stretch of the event
    loop (6 s of every client's requests): it is made ``loop_turns.TURN`` requests between turns."""
    import httpx
    from codegym_sandbox.api import native

    made = 0
    real = native.EvaluateResponse

    def counted(**fields: Any) -> Any:
        nonlocal made
        made += 1
        return real(**fields)

    monkeypatch.setattr(native, "EvaluateResponse", counted)
    one = {"language": "python", "programs": ["print(1)"], "tests": [{"stdin": "", "expected_stdout": "1\n"}]}
    assert client.post("/v1/evaluate", json=one).json()["results"][0]["verdict"] == "AC"  # now cached
    batch = {"requests": [one] * (8 * loop_turns.TURN)}

    async def longest_stretch() -> tuple[int, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url="http://s") as http:
            answer, longest = await _longest_stretch(lambda: made, http.post("/v1/evaluate/batch", json=batch))
        return answer.status_code, longest

    assert client.portal is not None
    status, longest = client.portal.call(longest_stretch)
    assert status == 200 and made == 8 * loop_turns.TURN + 1 and longest <= loop_turns.TURN, (status, made, longest)
