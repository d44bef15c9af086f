"""Both clients against the real sandbox app in-process: the same answers, the same batching."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from codegym_sandbox.client import AsyncSandboxClient, SandboxClient, SandboxRejected
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from codegym_sandbox.models import EvaluateRequest, EvaluateResponse, ExecuteRequest
from codegym_sandbox.models import Test as Case
from fastapi.testclient import TestClient

ADD = [Case(stdin="1 2\n", expected_stdout="3\n"), Case(stdin="5 5\n", expected_stdout="10\n")]
GROUPS = [
    EvaluateRequest(
        language="python", programs=["a, b = map(int, input().split())\nprint(a + b)", "print(3)"], tests=ADD
    ),
    EvaluateRequest(
        language="python",
        programs=["def sq(x):\n    return x * x", "def sq(x):\n    return 0"],
        tests=[Case(call=[3], expected=9)],
        function="sq",
    ),
    EvaluateRequest(
        language="python", programs=["print(", "import sys; sys.exit(3)"], tests=[Case(assert_code="assert True")]
    ),
]
EXECUTE = ExecuteRequest(language="python", code="print(input()[::-1])", stdin="abc\n", cache=False)


def settings() -> Settings:
    return Settings(backend="local", workers=2)


class Recording(httpx.BaseTransport):
    """A blocking transport onto a ``TestClient``'s app, with the paths asked for."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.paths = client, list[str]()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        r = self.client.request(
            request.method, request.url.path, content=request.content, headers={"content-type": "application/json"}
        )
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})


class AsyncRecording(httpx.AsyncBaseTransport):
    def __init__(self, app: httpx.AsyncBaseTransport) -> None:
        self.app, self.paths = app, list[str]()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.app.handle_async_request(request)


def verdicts(responses: list[EvaluateResponse | Exception]) -> list[list[list[str]]]:
    out = []
    for r in responses:
        assert isinstance(r, EvaluateResponse), r
        out.append([[t.verdict.value for t in p.tests] + [p.verdict.value] for p in r.results])
    return out


@pytest.fixture(scope="module")
def sync_answers() -> Iterator[tuple[list[object], list[str]]]:
    with TestClient(create_app(settings())) as app:
        recording = Recording(app)
        with SandboxClient("http://sandbox", transport=recording) as client:
            got: list[object] = [client.execute(EXECUTE).run.stdout]  # type: ignore[union-attr]
            got.append(verdicts(client.evaluate_many(GROUPS)))  # type: ignore[arg-type]
            got.append(verdicts([client.evaluate(GROUPS[0])]))
            got.append(sorted(lang.name for lang in client.languages() if lang.available))
            with pytest.raises(SandboxRejected) as refused:
                client.request("POST", "/v1/evaluate", {"language": "python", "programs": [], "tests": []})
            got.append(refused.value.status)
        yield got, recording.paths


async def async_answers() -> tuple[list[object], list[str]]:
    app = create_app(settings())
    async with app.router.lifespan_context(app):
        recording = AsyncRecording(httpx.ASGITransport(app=app))
        async with AsyncSandboxClient("http://sandbox", transport=recording) as client:
            got: list[object] = [(await client.execute(EXECUTE)).run.stdout]  # type: ignore[union-attr]
            got.append(verdicts(await client.evaluate_many(GROUPS)))  # type: ignore[arg-type]
            got.append(verdicts([await client.evaluate(GROUPS[0])]))
            got.append(sorted(lang.name for lang in await client.languages() if lang.available))
            with pytest.raises(SandboxRejected) as refused:
                await client.request("POST", "/v1/evaluate", {"language": "python", "programs": [], "tests": []})
            got.append(refused.value.status)
        return got, recording.paths


def test_sync_and_async_give_the_same_answers(sync_answers: tuple[list[object], list[str]]) -> None:
    got, _ = sync_answers
    assert got == asyncio.run(async_answers())[0]
    stdout, groups, alone, languages, refused = got
    assert stdout == "cba\n"
    # each test's verdict, then the program's: the server's, as it gave them
    add, square, asserts = (
        [["AC", "AC", "AC"], ["AC", "WA", "WA"]],
        [["AC", "AC"], ["WA", "WA"]],
        [["CE", "CE"], ["RE", "RE"]],
    )
    assert groups == [add, square, asserts]
    assert alone == groups[:1]
    assert "python" in languages  # type: ignore[operator]
    assert refused == 422


def test_both_send_small_groups_in_one_batch(sync_answers: tuple[list[object], list[str]]) -> None:
    _, paths = sync_answers
    assert paths == asyncio.run(async_answers())[1]
    assert paths == ["/v1/execute", "/v1/evaluate/batch", "/v1/evaluate", "/v1/languages", "/v1/evaluate"]
