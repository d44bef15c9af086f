"""SandboxFusion's ``/submit``, served by the sandbox itself where the evaluator is installed: it runs its tests
through a request of its own to the app, whose runs are its caller's."""

from __future__ import annotations

import pytest
from codegym_sandbox.api import deps
from codegym_sandbox.config import Settings
from codegym_sandbox.judging import off_loop
from codegym_sandbox.main import create_app
from fastapi import Request
from fastapi.testclient import TestClient

pytest.importorskip("codegym_evaluator", reason="the dataset routes are the evaluator's")

TASK = {"task_id": "t", "prompt": "echo", "kind": "stdio", "tests": [{"stdin": "1\n", "expected_stdout": "1\n"}]}


def test_a_submits_runs_are_its_callers_and_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 56: the request ``/submit`` makes came from the transport's own address (127.0.0.1), so every caller's
    ``/submit`` was one client's: one window, one turn and one ``MAX_CLIENT_REQUESTS`` for them all (an honest
    caller's took 6.9 s behind another's backlog, or was refused). It is its caller's now; and ``/submit`` itself
    is not counted against the caller's requests in flight, only the request it makes (one in flight at most here)."""
    seen: list[tuple[str, str]] = []
    real = deps.client_of

    def spy(request: Request) -> str:
        seen.append((request.url.path, real(request)))
        return real(request)

    monkeypatch.setattr(deps, "client_of", spy)
    settings = Settings(backend="local", workers=1, cache_entries=0, max_client_requests=1)
    with TestClient(create_app(settings), client=("192.0.2.7", 4000)) as client:
        body = {"dataset": "code_contests", "id": "t", "completion": "```python\nprint(input())\n```"}
        answer = client.post("/submit", json={**body, "config": {"provided_data": TASK}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] is True, answer.text
    assert ("/v1/evaluate", "192.0.2.7") in seen, seen
    assert all(who == "192.0.2.7" for _, who in seen), seen


CALL = {"task_id": "c", "prompt": "", "kind": "call", "entry_point": "f", "tests": [{"call": [2], "expected": 2}]}


def test_a_long_completion_is_read_off_the_loop() -> None:
    """Round 57: ``/submit`` extracted and sanitised a completion (a parse and a walk per statement, 7 s a MiB) on
    the server's event loop, uncounted: one completion of a MiB held every client's requests for 7 s, one of 18 MB
    the server's memory until it was killed. It is read in the comparison pool now, in its caller's turn."""
    off_loop.shutdown()  # the pool starts with the first work it is given: this completion's
    completion = "```python\ndef f(x):\n    return x\n" + "print(f(1))\n" * 1000 + "```"
    with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
        body = {"dataset": "humaneval", "id": "c", "completion": completion, "config": {"provided_data": CALL}}
        answer = client.post("/submit", json=body)
        assert answer.status_code == 200 and answer.json()["accepted"] is True, answer.text
        assert answer.json()["extracted_code"] == "def f(x):\n    return x", answer.text  # sanitised, in the pool
        assert off_loop._analysing.started  # the server's stop ends it


def test_provided_rows_are_made_tasks_off_the_loop_and_a_bad_one_says_which() -> None:
    """Round 57: provided rows were made tasks on the event loop, their assert tests' helpers parsing the row's
    starter code once a test: a request of 328 KB held another client 10 s. They are made in the pool now."""
    off_loop.shutdown()
    starter = "def helper(x):\n    return x\n" * 400  # past ON_LOOP_CHARS
    tests = [{"assert_code": f"assert f({k}) == helper({k})"} for k in range(20)]
    row = {"task_id": "a", "prompt": "", "kind": "assert", "entry_point": "f", "starter_code": starter, "tests": tests}
    with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
        answer = client.post("/get_prompts", json={"dataset": "humaneval", "config": {"provided_data": [row, row]}})
        assert answer.status_code == 200 and [p["labels"]["tests"] for p in answer.json()] == [20, 20], answer.text
        assert off_loop._analysing.started
        bad = {**row, "kind": "no such kind"}
        answer = client.post("/get_prompts", json={"dataset": "humaneval", "config": {"provided_data": [row, bad]}})
        assert answer.status_code == 400 and "row 1" in answer.json()["detail"], answer.text


def test_each_provided_row_is_a_call_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 58: a request's rows were made tasks in one call of the analysis pool, never sliced: 120 rows held
    every other client's work there 94 s. Each is a call of its own now, in its client's turn, and bounded."""
    calls: list[int] = []
    real = off_loop.analysed

    async def counted(*args: object, **kwargs: object) -> object:
        calls.append(len(str(args[3])))
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(off_loop, "analysed", counted)
    row = {"task_id": "a", "prompt": "", "kind": "call", "entry_point": "f", "tests": [{"call": [1], "expected": 1}]}
    with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
        answer = client.post("/get_prompts", json={"dataset": "humaneval", "config": {"provided_data": [row] * 3}})
        assert answer.status_code == 200 and len(answer.json()) == 3, answer.text
    assert len(calls) == 3, calls


def test_a_completion_past_the_reading_bound_is_not_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A completion whose reading takes more of the analysis pool than it may is a failing answer, saying so, with
    no program run: never a 500, nor the sandbox's failure a reward would mask."""

    real = off_loop.analysed

    async def too_costly(*args: object, **kwargs: object) -> object:
        if getattr(getattr(args[2], "func", None), "__name__", "") == "_prepared":  # the completion's reading
            raise off_loop.TooCostly("more than 5 s of CPU or 64 MiB of memory")
        return await real(*args, **kwargs)  # type: ignore[arg-type]  # the row's

    with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
        body = {"dataset": "humaneval", "id": "c", "completion": "x", "config": {"provided_data": CALL}}
        monkeypatch.setattr(off_loop, "analysed", too_costly)
        answer = client.post("/submit", json=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["accepted"] is False and result["extra"]["verdict"] == "CE", result
    assert "reading the completion took more than" in result["extra"]["error"], result


def test_a_relay_refused_is_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 62: a relay refused for its caller's own share was sent four more times, its body (41 MB for a row of
    4,096 large tests) encoded on the event loop each time: the caller is told, once."""
    import httpx

    sent: list[str] = []
    real = httpx.ASGITransport.handle_async_request

    async def refusing(self: httpx.ASGITransport, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/evaluate":
            sent.append(request.url.path)
            return httpx.Response(429, json={"detail": "busy"}, headers={"retry-after": "0"})
        return await real(self, request)

    monkeypatch.setattr(httpx.ASGITransport, "handle_async_request", refusing)
    with TestClient(create_app(Settings(backend="local", workers=1, cache_entries=0))) as client:
        body = {"dataset": "code_contests", "id": "t", "completion": "```python\nprint(input())\n```"}
        answer = client.post("/submit", json={**body, "config": {"provided_data": TASK}})
    assert answer.status_code == 502 and sent == ["/v1/evaluate"], (answer.status_code, sent)
