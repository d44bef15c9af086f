"""The OpenAI-compatible client against a fake server in-process, and against endpoints that fail."""

from __future__ import annotations

import httpx
import pytest
from codegym_evaluator.model_client import ModelClient, ModelError, Sampling

from .fake_openai import fake_openai_app

pytestmark = pytest.mark.anyio
URL = "http://model/v1"


def echo(prompt: str, i: int) -> str:
    return f"{i}:{prompt[-5:]}"


async def test_chat_and_completion_with_n_samples() -> None:
    app = fake_openai_app(echo)
    transport = httpx.ASGITransport(app=app)
    async with ModelClient(URL, "m", api="chat", transport=transport, api_key="sk-test") as client:
        chat = await client.generate([{"role": "user", "content": "hello world"}], Sampling(n=3, temperature=0.8))
        text = await client.generate("def f():", Sampling(n=2, stop=["\ndef", "\n#", "\nif", "\nprint", "\nclass"]))
        assert await client.models() == ["fake-coder"]
    assert chat == ["0:world", "1:world", "2:world"]
    assert text == ["0: f():", "1: f():"]
    first, second = app.state.requests
    assert first["n"] == 3 and first["temperature"] == 0.8 and first["model"] == "m"
    assert second["stop"] == ["\ndef", "\n#", "\nif", "\nprint"]  # at most four, as OpenAI allows


async def test_servers_that_give_one_choice_are_asked_for_the_rest() -> None:
    app = fake_openai_app(echo, max_choices=1)
    async with ModelClient(URL, "m", transport=httpx.ASGITransport(app=app)) as client:
        got = await client.generate("abcdef", Sampling(n=3))
    assert got == ["0:bcdef"] * 3
    assert [r["n"] for r in app.state.requests] == [3, 2, 1]


async def test_a_busy_endpoint_is_retried() -> None:
    app = fake_openai_app(echo, fail_first=2)
    async with ModelClient(URL, "m", transport=httpx.ASGITransport(app=app), backoff_s=0.001) as client:
        assert await client.generate("abcdef", Sampling()) == ["0:bcdef"]
    assert len(app.state.requests) == 3


async def test_an_endpoint_that_is_down_gives_a_clear_error_after_retries() -> None:
    calls = 0

    def down(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    client = ModelClient(URL, "m", retries=2, backoff_s=0.001, transport=httpx.MockTransport(down))
    async with client:
        with pytest.raises(
            ModelError, match=r"model endpoint http://model/v1/chat/completions failed after 3 attempts"
        ):
            await client.generate([{"role": "user", "content": "x"}], Sampling())
    assert calls == 3


async def test_a_refused_request_is_not_retried() -> None:
    calls = 0

    def refuse(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(404, json={"error": "model 'm' not found"})

    async with ModelClient(URL, "m", transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(ModelError, match="refused the request: HTTP 404"):
            await client.generate("x", Sampling())
    assert calls == 1
