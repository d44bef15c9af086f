"""SandboxFusion's dataset routes: a request whose ``provided_data`` cannot be judged is a 400 that says why."""

from __future__ import annotations

from typing import Any

import pytest
from codegym_evaluator.fusion_datasets import make_router
from codegym_sandbox.client import AsyncSandboxClient
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient


def _unreachable(request: Request) -> AsyncSandboxClient:
    raise AssertionError("a request with invalid tests must never reach the sandbox")


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    app.include_router(make_router(_unreachable))
    return TestClient(app, raise_server_exceptions=False)


TASK = {"task_id": "t", "prompt": "add", "kind": "stdio", "tests": [{"stdin": "1\n", "expected_stdout": "1\n"}]}
CALLS = [{"call": [1], "expected": 1}]
INVALID: dict[str, dict[str, Any]] = {
    "a test that is not an object": {**TASK, "tests": ["print(1)"]},
    "a test of no kind": {**TASK, "tests": [{"stdin": "1\n"}]},
    "a test of two kinds": {**TASK, "tests": [{"stdin": "1\n", "expected_stdout": "1\n", "assert_code": "x"}]},
    "a test with unknown fields": {**TASK, "tests": [{"expected_stdout": "1\n", "bogus": 1}]},
    "call tests without an entry point name": {**TASK, "kind": "call", "entry_point": "not a name", "tests": CALLS},
    "assert tests that are not text": {**TASK, "kind": "assert", "entry_point": "f", "tests": [{"assert_code": 5}]},
    "starter code that is not text": {**TASK, "starter_code": ["x"]},
    "a language that is not text": {**TASK, "language": 3},
}


@pytest.mark.parametrize("case", sorted(INVALID))
@pytest.mark.parametrize("route", ["/submit", "/get_prompt_by_id"])
def test_invalid_provided_tests_are_a_400_naming_the_row(client: TestClient, case: str, route: str) -> None:
    body = {
        "dataset": "mbpp",
        "id": "t",
        "completion": "```python\nprint(1)\n```",
        "config": {"provided_data": INVALID[case]},
    }
    r = client.post(route, json=body)
    assert r.status_code == 400, (case, r.status_code, r.text)
    assert "provided_data row 0" in r.json()["detail"], r.text


def test_a_list_of_rows_with_one_invalid_names_it(client: TestClient) -> None:
    rows = [TASK, {**TASK, "task_id": "u", "tests": [{"stdin": "1\n"}]}]
    r = client.post("/get_prompts", json={"dataset": "mbpp", "config": {"provided_data": rows}})
    assert r.status_code == 400 and "provided_data row 1" in r.json()["detail"], r.text
    r = client.post("/get_prompts", json={"dataset": "mbpp", "config": {"provided_data": [TASK]}})
    assert r.status_code == 200 and [p["id"] for p in r.json()] == ["t"], r.text


def test_a_list_route_keeps_no_rows_tests() -> None:
    """Round 60: each provided row's task came back from the pool whole and was kept for the request (a row of a few
    hundred characters is tens of thousands of tests): a list route takes back its prompt alone."""
    returned: list[object] = []

    async def analyse(request: Request, fn: Any, text: str, held_mb: int = 0, **_: Any) -> Any:
        value = fn(text)
        returned.append(value[0])
        return value

    app = FastAPI()
    app.include_router(make_router(_unreachable, analyse))
    many = {**TASK, "tests": [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(1000)]}
    rows = [many, {**many, "task_id": "u"}]
    with TestClient(app) as c:
        for route in ("/get_prompts", "/list_ids"):
            r = c.post(route, json={"dataset": "mbpp", "config": {"provided_data": rows}})
            assert r.status_code == 200, r.text
        r = c.post("/get_prompt_by_id", json={"dataset": "mbpp", "id": "t", "config": {"provided_data": many}})
        assert r.status_code == 200 and r.json()["labels"]["tests"] == 1000, r.text
    assert len(returned) == 5 and all(type(value) is dict and "tests" not in value for value in returned), returned


def test_a_row_of_more_tests_than_a_task_has_is_refused(client: TestClient) -> None:
    """Round 60: a LiveCodeBench row of 328 characters was 65,000 tests, which each /submit in flight held."""
    from codegym_evaluator.fusion_datasets import ROW_TESTS

    tests = [{"stdin": "1\n", "expected_stdout": "1\n"}]
    for n, status in ((ROW_TESTS, 200), (ROW_TESTS + 1, 400)):
        row = {**TASK, "tests": tests * n}
        r = client.post("/get_prompt_by_id", json={"dataset": "mbpp", "id": "t", "config": {"provided_data": row}})
        assert r.status_code == status, r.text[:300]
    assert f"more than {ROW_TESTS} tests" in r.json()["detail"], r.text[:300]


def test_many_wrong_rows_are_one_error(client: TestClient) -> None:
    """Round 62: each wrong row of ``provided_data`` was an error of its own, made on the event loop (a million zeros
    in 2 MB held every client 8 s)."""
    r = client.post("/get_prompts", json={"dataset": "mbpp", "config": {"provided_data": [0] * 100_000}})
    assert r.status_code == 422 and len(r.json()["detail"]) == 1, r.text[:500]


@pytest.mark.parametrize("route", ["/submit", "/get_prompt_by_id"])
def test_an_unknown_id_is_quoted_in_a_few_dozen_characters(client: TestClient, route: str) -> None:
    """Round 63: the id was quoted whole, as ``repr`` writes it: a 64 MB id of DELs made a 320 MB answer."""
    body = {"dataset": "humaneval", "id": "\x7f" * 200_000, "completion": "x", "config": {}}
    r = client.post(route, json=body)
    assert r.status_code == 404 and len(r.content) < 1024, (r.status_code, r.text[:300])


def test_a_row_whose_pickle_names_a_class_is_a_400_quoting_little(client: TestClient) -> None:
    """Round 64: a LiveCodeBench row's private tests, a pickle naming a module of a million characters, were refused
    by the reader with an error that quoted the name whole: a 500, whose log line held it twice (39 KB of body, 60 MB
    of log)."""
    import base64
    import json
    import zlib

    pickled = b"c" + b"A" * 1_000_000 + b"\nB\n."
    row = {
        "question_title": "t",
        "question_content": "q",
        "platform": "atcoder",
        "question_id": "x",
        "contest_id": "c",
        "contest_date": "2024-01-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "private_test_cases": base64.b64encode(zlib.compress(pickled, 9)).decode(),
        "metadata": "{}",
    }
    r = client.post("/get_prompts", json={"dataset": "livecodebench", "config": {"provided_data": [row]}})
    assert r.status_code == 400 and len(r.content) < 1024, (r.status_code, r.text[:300])
