"""A client of any OpenAI-compatible endpoint (vLLM, llama.cpp's server): chat or completion, n samples."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from .messages import message_text

log = logging.getLogger("codegym.evaluator")

Api = Literal["chat", "completion"]
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class ModelError(Exception):
    """The model endpoint failed for good (after the retries, or with a request it refuses)."""


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one request."""

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: list[str] = field(default_factory=list)
    seed: int | None = None


class ModelClient:
    """Async client of ``{base_url}/chat/completions`` and ``{base_url}/completions``.

    ``base_url`` is the API root (``http://host:8000/v1``). Servers that return fewer than ``n`` choices
    (llama.cpp) are asked again for the rest. ``concurrency`` bounds requests in flight; failed requests
    are retried ``retries`` times with exponential backoff.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api: Api = "chat",
        concurrency: int = 4,
        retries: int = 3,
        timeout_s: float = 600.0,
        backoff_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if api not in ("chat", "completion"):
            raise ValueError(f"api must be 'chat' or 'completion', not {api!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api: Api = api
        self.retries = retries
        self.backoff_s = backoff_s
        self._sem = asyncio.Semaphore(concurrency)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0), transport=transport
        )

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        error = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                async with self._sem:
                    response = await self._http.post(url, json=body)
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code == 200:
                    try:
                        data: dict[str, Any] = response.json()
                        return data
                    except ValueError:
                        error = f"answer is not JSON: {response.text[:200]!r}"
                else:
                    error = f"HTTP {response.status_code}: {response.text[:500]}"
                    if response.status_code not in _RETRY_STATUS:
                        raise ModelError(f"model endpoint {url} refused the request: {error}")
            if attempt < self.retries:
                log.warning("model request failed (attempt %d/%d): %s", attempt + 1, self.retries + 1, error)
                await asyncio.sleep(min(self.backoff_s * 2**attempt, 30.0) * random.uniform(0.75, 1.25))
        raise ModelError(f"model endpoint {url} failed after {self.retries + 1} attempts: {error}")

    async def _once(self, prompt: str | list[dict[str, str]], sampling: Sampling, n: int) -> list[str]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if sampling.stop:
            body["stop"] = sampling.stop[:4]  # OpenAI's limit; callers also cut at every stop themselves
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if isinstance(prompt, str):
            body["prompt"] = prompt
            data = await self._post("/completions", body)
        else:
            body["messages"] = prompt
            data = await self._post("/chat/completions", body)
        try:
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
            if isinstance(prompt, str):
                return [str(c.get("text") or "") for c in choices]
            return [message_text((c.get("message") or {}).get("content")) for c in choices]
        except (KeyError, TypeError, AttributeError):
            raise ModelError(f"model endpoint {self.base_url} answered without choices: {str(data)[:300]}") from None

    async def generate(self, prompt: str | list[dict[str, str]], sampling: Sampling) -> list[str]:
        """``sampling.n`` completions of a text prompt (completion API) or of chat messages (chat API)."""
        out: list[str] = []
        while len(out) < sampling.n:
            got = await self._once(prompt, sampling, sampling.n - len(out))
            if not got:
                raise ModelError(f"model endpoint {self.base_url} returned no choices")
            out += got
        return out[: sampling.n]

    async def models(self) -> list[str]:
        """The model ids the endpoint serves (``GET /models``)."""
        response = await self._http.get(f"{self.base_url}/models")
        response.raise_for_status()
        return [str(m["id"]) for m in response.json().get("data", [])]
