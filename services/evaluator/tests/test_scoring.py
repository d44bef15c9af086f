"""The scorer against a real sandbox app in-process, and against sandboxes that fail."""

from __future__ import annotations

import asyncio
import http.server
import json
import ssl
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.tasks import Task
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app

SANDBOX = "http://sandbox"  # any host: the transport decides where requests go

pytestmark = pytest.mark.anyio

ADD = Task(
    "add",
    "Read two integers and print their sum.",
    "stdio",
    [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "5 5", "expected_stdout": "10"}],
    metadata={"comparison": "whitespace"},
)
SQUARE = Task("sq", "square", "call", [{"call": [3], "expected": 9}, {"call": [-2], "expected": 4}], entry_point="sq")
STARTED = Task(
    "inc",
    'def inc(x):\n    """x plus one"""\n',
    "assert",
    [{"assert_code": "assert inc(1) == 2\nassert inc(-1) == 0"}],
    entry_point="inc",
    starter_code='def inc(x):\n    """x plus one"""\n',
)


async def test_a_group_gets_a_verdict_per_completion(sandbox: httpx.ASGITransport) -> None:
    completions = [
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "print(3)",
        "print(",
        "raise SystemExit(3)",
        "import time\ntime.sleep(30)",
        "print(3)",  # a duplicate is run again, and judged the same
    ]
    async with Scorer(SANDBOX, transport=sandbox, timeout_per_test=1.0) as scorer:
        scores = await scorer.score_group(ADD, completions)
    assert [s.verdict for s in scores] == ["AC", "WA", "CE", "RE", "TLE", "WA"]
    assert [s.passed for s in scores] == [2, 1, 0, 0, 0, 1]
    assert scores[1].test_verdicts == ["AC", "WA"]
    assert all(s.total == 2 for s in scores)
    assert scores[0].fenced and not scores[1].fenced
    assert scores[0].code == "a, b = map(int, input().split())\nprint(a + b)"
    assert not any(s.sandbox_error for s in scores)


async def test_call_and_assert_tasks(sandbox: httpx.ASGITransport) -> None:
    async with Scorer([SANDBOX, SANDBOX], transport=sandbox) as scorer:
        sq = await scorer.score_group(SQUARE, ["def sq(x):\n    return x * x", "def sq(x):\n    return abs(x) * 3"])
        inc = await scorer.score_group(
            STARTED, ["    return x + 1\n", "    return x\n", "def inc(x):\n    return 1 + x"]
        )
    assert [s.verdict for s in sq] == ["AC", "WA"]
    assert sq[1].passed == 1
    assert [s.verdict for s in inc] == ["AC", "WA", "AC"]


async def test_extract_false_sends_the_completion_as_it_is(sandbox: httpx.ASGITransport) -> None:
    async with Scorer(SANDBOX, transport=sandbox) as scorer:
        (score,) = await scorer.score_group(ADD, ["```python\nprint(3)\n```"], extract=False)
    assert score.verdict == "CE"


async def test_execute_many(sandbox: httpx.ASGITransport) -> None:
    async with Scorer(SANDBOX, transport=sandbox) as scorer:
        runs = await scorer.execute_many(["print('hi')", "1/0", "def f(:"])
    assert [r.verdict for r in runs] == ["AC", "RE", "CE"]
    assert runs[0].stdout == "hi\n" and runs[0].exit_code == 0
    assert "ZeroDivisionError" in runs[1].stderr


async def test_a_run_is_a_fresh_one_unless_the_cache_is_asked_for(sandbox: httpx.ASGITransport) -> None:
    # The execution reward's runs (execute_many) once took the sandbox's cache by default: a random program's first
    # draw was every later sample's reward.
    draw = "import os\nprint(os.urandom(8).hex())"
    async with Scorer(SANDBOX, transport=sandbox) as scorer:
        first, second = [(await scorer.execute_many([draw]))[0].stdout for _ in range(2)]
    assert first != second
    async with Scorer(SANDBOX, transport=sandbox, cache=True) as scorer:
        first, second = [(await scorer.execute_many([draw]))[0].stdout for _ in range(2)]
    assert first == second


async def test_an_unreachable_sandbox_gives_se_after_retries() -> None:
    calls = 0

    def refuse(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    transport = httpx.MockTransport(refuse)
    async with Scorer(SANDBOX, transport=transport, retries=2, backoff_s=0.001) as scorer:
        scores = await scorer.score_group(ADD, ["print(3)", "print(4)"])
        runs = await scorer.execute_many(["print(1)"])
    assert calls == 3 + 3
    assert [s.verdict for s in scores] == ["SE", "SE"]
    assert all(s.sandbox_error and s.total == 2 and "connection refused" in (s.error or "") for s in scores)
    assert runs[0].sandbox_error


async def test_saturation_is_retried_on_the_next_sandbox(sandbox: httpx.ASGITransport) -> None:
    seen: list[str] = []

    class Busy(httpx.AsyncBaseTransport):
        """The first sandbox is saturated (503 + Retry-After); the second is the real app."""

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.url.host)
            if request.url.host == "busy":
                return httpx.Response(503, headers={"Retry-After": "0"}, json={"detail": "queue full"})
            return await sandbox.handle_async_request(request)

    async with Scorer(["http://busy", SANDBOX], transport=Busy(), backoff_s=0.001) as scorer:
        scores = await scorer.score_group(ADD, ["print(3)"])
    assert seen == ["busy", "sandbox"]
    assert scores[0].verdict == "WA"


async def test_se_results_are_retried_and_kept_apart_when_they_persist() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        se = {"verdict": "SE", "wall_s": 0.0, "cpu_s": None, "stdout": "", "stderr": "worker died"}
        program = {"verdict": "SE", "passed": 0, "total": 2, "stopped_early": False, "compile": None, "tests": [se]}
        return httpx.Response(200, json={"results": [program], "wall_s": 0.0})

    transport = httpx.MockTransport(answer)
    async with Scorer(SANDBOX, transport=transport, retries=1, backoff_s=0.001) as scorer:
        (score,) = await scorer.score_group(ADD, ["print(3)"])
    assert score.sandbox_error and score.error == "worker died"


async def test_a_bad_request_is_not_retried() -> None:
    calls = 0

    def reject(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(401, json={"detail": "missing bearer token"})

    async with Scorer(SANDBOX, transport=httpx.MockTransport(reject), backoff_s=0.001) as scorer:
        (score,) = await scorer.score_group(ADD, ["print(3)"])
    assert calls == 1
    assert score.sandbox_error and "401" in (score.error or "")


async def test_a_task_whose_tests_the_sandbox_would_refuse_raises() -> None:
    bad = Task("bad", "p", "stdio", [{"stdin": "1"}])
    async with Scorer(SANDBOX) as scorer:
        with pytest.raises(ValueError, match="'bad'"):
            await scorer.score_group(bad, ["print(1)"])


async def test_what_a_program_prints_does_not_hide_its_pass(sandbox: httpx.ASGITransport) -> None:
    noisy = "    print('checking', x)\n    return x + 1\n"
    async with Scorer(SANDBOX, transport=sandbox) as scorer:
        (score,) = await scorer.score_group(STARTED, [noisy])
    assert score.verdict == "AC"


class Recording(httpx.AsyncBaseTransport):
    """The real sandbox app, with the paths asked for; ``missing`` paths answer 404 (an older server)."""

    def __init__(self, app: httpx.AsyncBaseTransport, missing: tuple[str, ...] = ()) -> None:
        self.app, self.missing, self.paths = app, missing, list[str]()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path in self.missing:
            return httpx.Response(404, json={"detail": "Not Found"})
        return await self.app.handle_async_request(request)


GROUPS = [
    (ADD, ["a, b = map(int, input().split())\nprint(a + b)", "print(3)"]),
    (SQUARE, ["def sq(x):\n    return x * x", "def sq(x):\n    return abs(x) * 3"]),
    (STARTED, ["    return x + 1\n", "    return x\n", "print("]),
]
EXPECTED = [["AC", "WA"], ["AC", "WA"], ["AC", "WA", "CE"]]


async def _verdicts(scorer: Scorer, groups: list[tuple[Task, list[str]]]) -> list[list[str]]:
    scored = await asyncio.gather(*(scorer.score_group(task, codes, extract=False) for task, codes in groups))
    return [[s.verdict for s in scores] for scores in scored]


async def test_small_groups_scored_together_go_in_one_batch(sandbox: httpx.ASGITransport) -> None:
    recording = Recording(sandbox)
    async with Scorer(SANDBOX, transport=recording) as scorer:
        assert await _verdicts(scorer, GROUPS) == EXPECTED
        assert recording.paths == ["/v1/evaluate/batch"]
        # A group alone, or one as large as a batch, goes on its own.
        assert await _verdicts(scorer, GROUPS[:1]) == EXPECTED[:1]
    async with Scorer(SANDBOX, transport=recording, batch_runs=0) as scorer:
        assert await _verdicts(scorer, GROUPS) == EXPECTED
    assert recording.paths == ["/v1/evaluate/batch"] + ["/v1/evaluate"] * 4


async def test_batch_runs_bounds_a_batch(sandbox: httpx.ASGITransport) -> None:
    recording = Recording(sandbox)
    five = [(ADD, [f"print({i})"]) for i in (3, 0, 10, 3, 0)]  # 2 runs each
    async with Scorer(SANDBOX, transport=recording, batch_runs=4) as scorer:
        scored = await asyncio.gather(*(scorer.score_group(task, codes) for task, codes in five))
    assert [scores[0].passed for scores in scored] == [1, 0, 1, 1, 0]  # each answer back with its own group
    assert sorted(recording.paths) == ["/v1/evaluate"] + ["/v1/evaluate/batch"] * 2


async def test_a_sandbox_without_batches_gets_the_groups_one_by_one(sandbox: httpx.ASGITransport) -> None:
    recording = Recording(sandbox, missing=("/v1/evaluate/batch",))
    async with Scorer(SANDBOX, transport=recording) as scorer:
        assert await _verdicts(scorer, GROUPS) == EXPECTED
        assert await _verdicts(scorer, GROUPS) == EXPECTED
    assert recording.paths == ["/v1/evaluate/batch"] + ["/v1/evaluate"] * 6  # asked once, then never again


async def test_a_failed_batch_is_a_sandbox_error_for_each_of_its_groups() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with Scorer(SANDBOX, transport=httpx.MockTransport(refuse), retries=1, backoff_s=0.001) as scorer:
        scored = await asyncio.gather(*(scorer.score_group(task, codes, extract=False) for task, codes in GROUPS))
    assert [[s.verdict for s in scores] for scores in scored] == [["SE"] * len(codes) for _, codes in GROUPS]
    assert all("connection refused" in (s.error or "") for scores in scored for s in scores)


async def test_an_https_sandbox_is_verified(tmp_path: Path) -> None:
    # A sandbox behind TLS with a certificate nobody signed: the scorer refuses it (no CA bundle is loaded
    # for http:// URLs only, and that must never switch verification off for https).
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        async with Scorer(f"https://127.0.0.1:{server.server_address[1]}", retries=0) as scorer:
            (score,) = await scorer.score_group(ADD, ["print(3)"])
    finally:
        server.shutdown()
        server.server_close()
    assert score.sandbox_error and "CERTIFICATE_VERIFY_FAILED" in (score.error or ""), score.error


async def test_a_batch_too_large_for_the_server_goes_group_by_group() -> None:
    app = create_app(Settings(backend="local", workers=2, max_runs_per_request=4))
    async with app.router.lifespan_context(app):
        recording = Recording(httpx.ASGITransport(app=app))
        async with Scorer(SANDBOX, transport=recording) as scorer:
            assert await _verdicts(scorer, GROUPS) == EXPECTED  # 4 + 4 + 3 runs: over the server's 4 together
            assert await _verdicts(scorer, GROUPS) == EXPECTED  # and batches are tried again: it may fit next time
    assert recording.paths == (["/v1/evaluate/batch"] + ["/v1/evaluate"] * 3) * 2


@pytest.mark.parametrize(("program", "tests"), [("RE", ["WA", "RE"]), ("TLE", ["AC", "TLE"]), ("MLE", ["MLE"])])
async def test_the_verdict_of_a_program_is_the_servers(program: str, tests: list[str]) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        outs = [{"verdict": v, "wall_s": 0.0, "cpu_s": None, "stdout": "", "stderr": ""} for v in tests]
        passed = tests.count("AC")
        result = {
            "verdict": program,
            "passed": passed,
            "total": 2,
            "stopped_early": False,
            "compile": None,
            "tests": outs,
        }
        return httpx.Response(200, json={"results": [result], "wall_s": 0.0})

    async with Scorer(SANDBOX, transport=httpx.MockTransport(answer)) as scorer:
        (score,) = await scorer.score_group(ADD, ["print(3)"])
    assert (score.verdict, score.test_verdicts) == (program, tests)  # never derived again from the tests


async def test_every_program_runs_afresh_unless_the_cache_is_asked_for(sandbox: httpx.ASGITransport) -> None:
    """A program whose answer was a lucky guess (os.urandom, the time) once was paid again from the sandbox's
    result cache for every later sample of its text: a Scorer asks for fresh runs unless told otherwise."""
    asked: list[bool] = []

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            asked.append(bool(json.loads(request.read()).get("cache", True)))
            return await sandbox.handle_async_request(request)

    for cache in (False, True):
        asked.clear()
        scorer = Scorer(SANDBOX, transport=Recording(), batch_runs=0, cache=True) if cache else None
        async with scorer or Scorer(SANDBOX, transport=Recording(), batch_runs=0) as used:
            await used.score_group(ADD, ["a, b = map(int, input().split())\nprint(a + b)\n"], extract=False)
        assert asked and set(asked) == {cache}


COIN = Task("coin", "Print 1.", "stdio", [{"stdin": "", "expected_stdout": "1"}])
FLIP = "import os\nprint(os.urandom(1)[0] % 2)\n"


async def test_identical_samples_each_run_unless_the_cache_is_asked_for(sandbox: httpx.ASGITransport) -> None:
    """The samples of a group that are the same text were once sent as one program: one coin flip was the reward
    of every copy, for a GRPO group and for pass@k alike. Each runs now (16 copies: all alike by chance 2 in
    65,536); with the cache asked for, one run stands for all, as the cache would answer them."""
    sent: list[int] = []

    class Counting(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            body = json.loads(request.read())
            sent.extend(len(group["programs"]) for group in body.get("requests", [body]))
            return await sandbox.handle_async_request(request)

    async with Scorer(SANDBOX, transport=Counting()) as scorer:
        scores = await scorer.score_group(COIN, [FLIP] * 16, extract=False)
    assert sum(sent) == 16
    assert {s.verdict for s in scores} == {"AC", "WA"}

    sent.clear()
    async with Scorer(SANDBOX, transport=Counting(), cache=True) as scorer:
        scores = await scorer.score_group(COIN, [FLIP] * 16, extract=False)
    assert sum(sent) == 1
    assert len({s.verdict for s in scores}) == 1


async def test_a_lone_surrogate_fails_no_request(sandbox: httpx.ASGITransport) -> None:
    """A model can write a lone surrogate, which no UTF-8 file holds: sent as it was, it failed the request's
    encoding, and the whole group's scores (its honest neighbours') with it."""
    async with Scorer(SANDBOX, transport=sandbox, batch_runs=0) as scorer:
        right = "a, b = map(int, input().split())\nprint(a + b)\n"
        got = await scorer.score_group(ADD, [right, right + "# \ud800\n"], extract=False)
    assert [s.verdict for s in got] == ["AC", "AC"]
