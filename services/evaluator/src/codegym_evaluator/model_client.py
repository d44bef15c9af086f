"""A client of any OpenAI-compatible endpoint (vLLM, llama.cpp's server): chat or completion, n samples.

Every way a request or its answer can fail here is a :class:`ModelError`, the one error its callers handle (a run
stops with its ``error`` set and its summary written): a body that cannot be written, an endpoint down or
refusing, an answer too large, not JSON, nested past what the decoder can read, or without choices. Text sent
is made :func:`~codegym_evaluator.messages.writable` first, and so is every answer returned.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import reprlib
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from .messages import message_text, writable

log = logging.getLogger("codegym.evaluator")

Api = Literal["chat", "completion"]
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_ANSWER_BYTES = 64 << 20  # far more than n samples of max_tokens each; a larger answer is not read further


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
    are retried ``retries`` times with exponential backoff, as is an answer that cannot be read (larger than
    ``max_answer_bytes``, not a JSON object).
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
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if api not in ("chat", "completion"):
            raise ValueError(f"api must be 'chat' or 'completion', not {api!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api: Api = api
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_answer_bytes = max_answer_bytes
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

    async def _read(self, method: str, url: str, content: bytes | None = None) -> tuple[int, bytes | None]:
        """The status and body of one request; the body None when it is larger than ``max_answer_bytes``."""
        headers = {"Content-Type": "application/json"} if content is not None else None
        async with self._http.stream(method, url, content=content, headers=headers) as response:
            raw = bytearray()
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > self.max_answer_bytes:
                    return response.status_code, None
            return response.status_code, bytes(raw)

    async def _ask(self, method: str, url: str, content: bytes | None = None, *, retries: int) -> dict[str, Any]:
        """The JSON object the endpoint answers, asked ``retries`` times more; every failure raises ``ModelError``."""
        error = "no attempt made"
        for attempt in range(retries + 1):
            try:
                async with self._sem:
                    status, raw = await self._read(method, url, content)
            except httpx.HTTPError as exc:
                error = _why(exc)
            except Exception as exc:  # not the endpoint's failure: a request this client cannot make
                raise ModelError(f"model endpoint {url} could not be asked: {_why(exc)}") from None
            else:
                if raw is None:
                    error = f"HTTP {status}: answer larger than {self.max_answer_bytes} bytes"
                elif status == 200:
                    try:
                        return _json_object(raw)
                    except Exception as exc:  # RecursionError and MemoryError too: every way decoding fails
                        error = f"answer is not a JSON object ({_why(exc)}): {raw[:200]!r}"
                else:
                    error = f"HTTP {status}: {raw[:500].decode('utf-8', 'replace')}"
                    if status not in _RETRY_STATUS:
                        raise ModelError(f"model endpoint {url} refused the request: {error}")
            if attempt < retries:
                log.warning("model request failed (attempt %d/%d): %s", attempt + 1, retries + 1, error)
                await asyncio.sleep(min(self.backoff_s * 2**attempt, 30.0) * random.uniform(0.75, 1.25))
        raise ModelError(f"model endpoint {url} failed after {retries + 1} attempts: {error}")

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        try:
            # Written here, not by httpx: its strict UTF-8 fails on a lone surrogate of an earlier answer
            content = writable(json.dumps(body, ensure_ascii=False)).encode("utf-8")
        except Exception as exc:
            raise ModelError(f"a request to model endpoint {url} could not be written: {_why(exc)}") from None
        return await self._ask("POST", url, content, retries=self.retries)

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
                return [writable(str(c.get("text") or "")) for c in choices]
            return [writable(message_text((c.get("message") or {}).get("content"))) for c in choices]
        except Exception:  # any shape but the API's: no choices, choices that are not objects
            raise ModelError(f"model endpoint {self.base_url} answered without choices: {_excerpt(data)}") from None

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
        """The model ids the endpoint serves (``GET /models``); ``ModelError`` when it cannot say."""
        url = f"{self.base_url}/models"
        data = await self._ask("GET", url, retries=0)  # asked once, as a run starts: a wrong URL says so at once
        try:
            return [str(m["id"]) for m in data.get("data", [])]
        except Exception:
            raise ModelError(f"model endpoint {url} answered without model ids: {_excerpt(data)}") from None


def _json_object(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}")
    return data


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _excerpt(data: Any) -> str:
    """A bounded view of an answer, however deep or long it is."""
    shown = reprlib.Repr()
    shown.maxlevel, shown.maxstring, shown.maxother = 4, 200, 200
    return shown.repr(data)[:300]
