"""A small OpenAI-compatible server for tests: answers chat and completion requests from a lookup table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

Answer = Callable[[str, int], str]  # (prompt text, choice index) -> completion text


def fake_openai_app(answer: Answer, *, max_choices: int = 100, fail_first: int = 0) -> FastAPI:
    """An app serving ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions``.

    ``answer`` makes each choice from the prompt (the last user message for chat). At most ``max_choices``
    choices come back per request (as llama.cpp's server gives one), and the first ``fail_first``
    requests get a 503. ``app.state.requests`` keeps every request body.
    """
    app = FastAPI()
    app.state.requests = []

    def failing(body: dict[str, Any]) -> JSONResponse | None:
        app.state.requests.append(body)
        if len(app.state.requests) <= fail_first:
            return JSONResponse({"error": "loading model"}, status_code=503)
        return None

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fake-coder", "object": "model"}]}

    @app.post("/v1/completions", response_model=None)
    async def completions(body: dict[str, Any]) -> dict[str, Any] | JSONResponse:
        if (fail := failing(body)) is not None:
            return fail
        n = min(int(body.get("n", 1)), max_choices)
        choices = [{"index": i, "text": answer(body["prompt"], i), "finish_reason": "stop"} for i in range(n)]
        return {"object": "text_completion", "model": body["model"], "choices": choices}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: dict[str, Any]) -> dict[str, Any] | JSONResponse:
        if (fail := failing(body)) is not None:
            return fail
        n = min(int(body.get("n", 1)), max_choices)
        prompt = body["messages"][-1]["content"]
        choices = [
            {"index": i, "message": {"role": "assistant", "content": answer(prompt, i)}, "finish_reason": "stop"}
            for i in range(n)
        ]
        return {"object": "chat.completion", "model": body["model"], "choices": choices}

    return app
