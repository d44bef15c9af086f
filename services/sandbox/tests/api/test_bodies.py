"""``/v1/evaluate``'s bodies validated a slice of tests at a time: what FastAPI would answer, with the event loop
serving others between slices."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.api import bodies
from codegym_sandbox.main import create_app
from codegym_sandbox.models import EvaluateBatchRequest, EvaluateRequest
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from sandbox_support import settings_for

MANY = 3 * bodies.SLICE + 5
RUNS = 1 << 18
EXTRA = {"stdin": "x", "expected_stdout": "", "extra": 1}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """A body is refused before any backend is asked: the local one stands for all."""
    with TestClient(create_app(settings_for("local"))) as c:
        yield c


def request(tests: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"language": "python", "programs": ["print(input())"], "tests": tests, **more}


def stdin_tests(n: int) -> list[dict[str, Any]]:
    return [{"stdin": str(i), "expected_stdout": str(i)} for i in range(n)]


def test_a_body_is_the_request_plain_validation_makes() -> None:
    calls = [{"call": [i], "expected": i} for i in range(MANY)]
    for body in (request(stdin_tests(MANY), early_stop=True), request(calls, function="f", comparison="float")):
        assert asyncio.run(bodies.evaluate_request(body, RUNS)) == EvaluateRequest.model_validate(body)
    batch = {"requests": [request(stdin_tests(5)), request(stdin_tests(MANY))]}
    assert asyncio.run(bodies.evaluate_batch(batch, RUNS)) == EvaluateBatchRequest.model_validate(batch)


def test_the_event_loop_serves_others_between_slices() -> None:
    """A body of tests given whole to pydantic held every client's requests until it was done (0.8 s for 262,000,
    refused at the last or not): others' work runs between its slices."""

    async def turns_while(validation: Any) -> int:
        turns, done = 0, False

        async def other_client() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(other_client())
        await asyncio.sleep(0)
        before = turns
        try:
            await validation
        except RequestValidationError:
            pass
        done = True
        await ticking
        return turns - before

    one = request(stdin_tests(MANY))
    refused_at_the_end = request([*stdin_tests(MANY), {"stdin": "no expected output"}])
    batch = {"requests": [request(stdin_tests(3)) for _ in range(MANY)]}
    assert asyncio.run(turns_while(bodies.evaluate_request(one, RUNS))) >= 3
    assert asyncio.run(turns_while(bodies.evaluate_request(refused_at_the_end, RUNS))) >= 3
    assert asyncio.run(turns_while(bodies.evaluate_batch(batch, RUNS))) >= 3


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (request([*stdin_tests(MANY), {"stdin": "x"}]), ["body", "tests", MANY]),
        (request([*stdin_tests(MANY), EXTRA]), ["body", "tests", MANY, "extra"]),
        (request(stdin_tests(2), function="not a name"), ["body"]),
        (request(stdin_tests(2), programs=[]), ["body", "programs"]),
        (request([]), ["body", "tests"]),
        (request("not a list"), ["body", "tests"]),  # type: ignore[arg-type]
        ([1, 2], ["body"]),
        (
            {"requests": [request(stdin_tests(1)), request([*stdin_tests(MANY), {"call": [1]}])]},
            ["body", "requests", 1, "tests", MANY],
        ),
        ({"requests": [request(stdin_tests(1))], "extra": 1}, ["body", "extra"]),
        ({"requests": []}, ["body", "requests"]),
    ],
)
def test_a_bad_body_is_refused_where_fastapi_would_say(client: TestClient, body: Any, loc: list[Any]) -> None:
    route = "/v1/evaluate/batch" if isinstance(body, dict) and "requests" in body else "/v1/evaluate"
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc, r.text


def test_an_evaluate_route_documents_its_body_as_the_model(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for route, model in (("/v1/evaluate", EvaluateRequest), ("/v1/evaluate/batch", EvaluateBatchRequest)):
        schema = paths[route]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert set(schema["properties"]) == set(model.model_fields), route
        assert paths[route]["post"]["requestBody"]["required"] is True


def test_a_body_past_the_runs_a_request_may_ask_is_refused_before_it_is_validated() -> None:
    """Round 59: a body of 30 MB was validated, 5 s of the loop in slices, before it was refused for its runs."""
    bad = [{"no": "test"}] * MANY  # never validated: refused for its count first
    with pytest.raises(RequestValidationError) as refused:
        asyncio.run(bodies.evaluate_request(request(bad, programs=["a", "b"]), MANY))
    assert "2 programs x" in str(refused.value.errors()) and "max_runs_per_request" in str(refused.value.errors())
    with pytest.raises(RequestValidationError) as refused:
        asyncio.run(bodies.evaluate_batch({"requests": [request(bad), request(bad)]}, MANY))
    assert refused.value.errors()[0]["loc"] == ["body", "requests"]
    # Round 60: a body of no programs, or none as a list, was runs of none, and its tests were validated whole.
    for programs in ([], "x", None):
        with pytest.raises(RequestValidationError) as refused:
            asyncio.run(bodies.evaluate_request(request(bad, programs=programs), MANY - 1))
        assert "max_runs_per_request" in str(refused.value.errors()), programs


@pytest.mark.parametrize(
    "route,body",
    [
        ("/run_code", {"code": "print(1)", "language": [0] * 200_000}),
        ("/v1/execute", {"code": "print(1)", "language": "python", "stdin": [0] * 200_000}),
        ("/v1/evaluate", {"language": "python", "programs": [], "tests": [{"stdin": 0}] * 3000}),
        ("/run_code", {"code": "print(1)", "language": "python", "files": {str(i): 0 for i in range(5000)}}),
    ],
)
def test_a_refusal_names_what_is_wrong_without_quoting_the_body(client: TestClient, route: str, body: Any) -> None:
    """Round 60: each error of a 422 quoted its input, walked on the event loop (a body of two million tests, 38 s of
    every client's requests) and answered at five times the body's size."""
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(r.content) < 8192 and all("input" not in err for err in detail), r.text[:2000]
    assert len(detail) <= 21 and detail[0]["loc"][0] == "body", detail


def test_a_validators_refusal_says_why_in_its_context(client: TestClient) -> None:
    """A validator's exception in an error's context was written ``{}``; it is its message now, cut as one is."""
    r = client.post("/v1/execute", json={"code": "print(1)", "language": "python", "files": {"a": 1}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["ctx"] == {"error": "1 of the files are not strings or null"}, r.text


@pytest.mark.parametrize(
    "route,body",
    [
        ("/run_code", {"code": "print(1)", "language": "python", "fetch_files": [0] * 300_000}),
        ("/v1/execute", {"code": "print(1)", "language": "python", "fetch_files": [0] * 300_000}),
        ("/v1/execute", {"code": "print(1)", "language": "python", "files": {str(i): 0 for i in range(20_000)}}),
        (
            "/v1/evaluate",
            {"language": "python", "programs": [0] * 100_000, "tests": [{"stdin": "", "expected_stdout": ""}]},
        ),
        ("/run_jupyter", {"cells": ["1"], "fetch_files": [0] * 300_000}),
        ("/v1/sessions", {"language": "python", "files": {str(i): 0 for i in range(20_000)}}),
        # Round 62: unknown fields, each an error of its own.
        ("/v1/execute", {"code": "print(1)", "language": "python", **{f"x{i}": 0 for i in range(100_000)}}),
        (
            "/v1/evaluate",
            {
                "language": "python",
                "programs": ["1"],
                "tests": [{"stdin": "", "x": 0, **{f"y{i}": 0 for i in range(50_000)}}],
            },
        ),
        ("/v1/sessions", {"language": "python", **{f"x{i}": 0 for i in range(100_000)}}),
    ],
)
def test_a_list_of_many_wrong_items_is_one_error(client: TestClient, route: str, body: Any) -> None:
    """Round 61: each wrong item of a list or a mapping was an error made on the event loop, all of them before the
    answer kept twenty (a million: 17 s of every client's requests; four million: the server OOM-killed)."""
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text[:500]
    assert len(r.json()["detail"]) == 1, r.text[:500]


LONG = "\x7f" * 200_000  # a DEL: one byte of JSON, four characters of a repr


@pytest.mark.parametrize(
    "route,body",
    [
        ("/v1/execute", {"code": "1", "language": "python", **{f"{LONG}{i}": 0 for i in range(17)}}),
        ("/v1/execute", {"code": "1", "language": "python", LONG: 0}),  # its key in the error's place
        ("/v1/execute", {"code": "1", "language": "python", "files": {"/x" + LONG: ""}}),
        ("/run_code", {"code": "1", "language": "python", "files": {"../" + LONG: ""}}),
        ("/run_code", {"code": "1", "language": LONG}),
        ("/v1/execute", {"code": "1", "language": LONG}),
        ("/run_jupyter", {"cells": ["1"], "kernel": LONG}),
        ("/execute", {"generated_code": "1", "language": LONG}),
    ],
)
def test_an_answer_quotes_a_few_dozen_characters_of_a_clients_string(client: TestClient, route: str, body: Any) -> None:
    """Round 63: an unknown key, a file's name, a language or a kernel was quoted whole, as ``repr`` writes it: a 64
    MB body made a 320 MB answer on the event loop, and four of them, unread, took the server past 4 GB."""
    r = client.post(route, json=body)
    assert len(r.content) < 4096, (r.status_code, len(r.content), r.text[:300])


@pytest.mark.parametrize(
    "route,body",
    [
        ("/v1/evaluate", {"language": "python", "programs": ["1"], "tests": [{"stdin": 0, "timeout_s": "x"}] * 512}),
        (
            "/v1/execute",
            {"code": "1", "language": "python", "files": {str(i): 0 for i in range(4096)}, "fetch_files": [0] * 4096},
        ),
    ],
)
def test_a_request_of_many_wrong_items_in_bounds_is_a_few_errors(client: TestClient, route: str, body: Any) -> None:
    """Round 63: each list's wrong items were bounded, the request's were not: 512 wrong tests, each with its own
    errors, were 10,752 errors of one slice; 4,096 wrong files and 4,096 wrong names 8,192, all made on the loop."""
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text[:500]
    detail = r.json()["detail"]
    assert len(detail) <= 4 and "more errors" not in r.text, detail


@pytest.mark.parametrize(
    "body",
    [
        {"code": "1", "language": "python", "files": {"a": 0}},  # ``models.at_most``'s error of a file's kind
        {"code": "1", "language": "python", "fetch_files": ["a"] * 4097},  # its length's
    ],
)
def test_a_refused_body_is_not_kept(client: TestClient, body: Any) -> None:
    """Round 63: a validator's error, held by pydantic's, held through its traceback the frame that held pydantic's:
    a cycle Python's collector cannot see, and every such ``/run_code`` kept its body and what it was parsed into
    (4,096 wrong files: 0.9 MB a request, 1.7 GB in 6 s)."""
    for _ in range(20):
        assert client.post("/run_code", json=body).status_code == 422
    gc.collect()
    kept = [
        o
        for o in gc.get_objects()
        if type(o) is ValueError and ("of the files" in str(o) or "4097 names" in str(o))  # no proxy's __class__ read
    ]
    assert not kept, kept[:3]
