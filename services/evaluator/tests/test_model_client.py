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


def raw_answer(content: bytes, status: int = 200) -> httpx.MockTransport:
    """An endpoint that answers every request with ``content`` as it is (bytes no JSON library would write)."""
    return httpx.MockTransport(lambda request: httpx.Response(status, content=content))


async def test_a_lone_surrogate_in_an_answer_or_a_prompt_fails_no_request() -> None:
    # JSON may escape half of a character ("\ud83d"): Python decodes it, and no UTF-8 body can hold it again.
    half = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"print(0)  # \\ud83d"}}]}'
    async with ModelClient(URL, "m", transport=raw_answer(half)) as client:
        (answer,) = await client.generate([{"role": "user", "content": "x"}], Sampling())
    assert answer.startswith("print(0)  # \ufffd") and answer.encode("utf-8")  # U+FFFD for each byte of it
    app = fake_openai_app(echo)
    async with ModelClient(URL, "m", transport=httpx.ASGITransport(app=app)) as client:
        chat = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "# \ud83d"},
            {"role": "user", "content": "again \ud83d"},
        ]
        (echoed,) = await client.generate(chat, Sampling())
    assert echoed.endswith("\ufffd") and app.state.requests[0]["messages"][1]["content"].startswith("# \ufffd")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "RecursionError"),  # nested past what the decoder can read
        (b'["choices"]', "a JSON list"),
        (b"x" * 400_000, "larger than 300000 bytes"),
        (b"\xff\xfe{", "not a JSON object"),
    ],
)
async def test_every_answer_that_cannot_be_read_is_a_model_error(content: bytes, why: str) -> None:
    client = ModelClient(URL, "m", retries=1, backoff_s=0.001, max_answer_bytes=300_000, transport=raw_answer(content))
    async with client:
        with pytest.raises(ModelError, match="failed after 2 attempts") as failed:
            await client.generate("x", Sampling())
        with pytest.raises(ModelError, match="models failed after 1 attempts"):
            await client.models()
    assert why in str(failed.value)


async def test_listing_the_models_of_an_endpoint_that_is_down_is_a_model_error() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with ModelClient(URL, "m", transport=httpx.MockTransport(down)) as client:
        with pytest.raises(ModelError, match="models failed after 1 attempts: ConnectError"):
            await client.models()
