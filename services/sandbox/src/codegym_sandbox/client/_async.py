"""``AsyncSandboxClient``: the client for event loops (the evaluator, the trainer's rewards, the data tools)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ..api.fusion_models import RunCodeResponse
from ..models import EvaluateResponse, ExecuteResponse, LanguageOut
from . import _core
from ._core import Body, Core, RetryPolicy, Send
from ._sync import DEFAULT_URL
from .exceptions import SandboxError, SandboxProtocolError
from .sessions import AsyncSession, AsyncSessionStart, create_body, finding

Queued = tuple[dict[str, Any], "asyncio.Future[EvaluateResponse]"]


class AsyncSandboxClient:
    """Async client of one or more sandbox servers (see the package's docstring).

    ``concurrency`` bounds the requests in flight over all URLs. Groups passed to :meth:`evaluate` at the
    same time (before the event loop comes back to the client) that are smaller than ``batch_runs``
    (programs x tests) go together in ``/v1/evaluate/batch`` requests; ``batch_runs=0`` sends each alone.
    The client belongs to the event loop it first sends on.
    """

    def __init__(
        self,
        urls: str | Sequence[str] = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float | None = 120.0,
        retry: RetryPolicy | None = None,
        batch_runs: int = 64,
        concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self._core = Core(urls, token=token, retry=retry, batch_runs=batch_runs)
        self._sem = asyncio.Semaphore(concurrency)
        self._queued: list[Queued] = []
        self._sending: set[asyncio.Task[None]] = set()
        # As many connections as requests in flight, kept alive: a larger pool only costs the client CPU
        # (httpcore looks at every pooled connection for every request).
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._timeout_s = timeout
        self._http = httpx.AsyncClient(
            headers=self._core.headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=transport,
            limits=limits,
            verify=self._core.verify,
        )

    def _step_timeout(self, step: Send) -> httpx.Timeout | Any:
        return _core.request_timeout(self._timeout_s, step.wait_s)

    @property
    def urls(self) -> list[str]:
        return self._core.urls

    @property
    def retry(self) -> RetryPolicy:
        return self._core.retry

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, body: Body | None = None) -> Any:
        """``method path`` with the retry policy; the answer's JSON. Raises ``SandboxError``."""
        return await self._run(self._core.exchange(method, path, None if body is None else _core.wire(body)))

    async def _run(self, exchange: _core.Exchange) -> Any:
        """Perform an exchange's steps; its answer."""
        try:
            step = next(exchange)
        except StopIteration as done:  # answered without a request
            return done.value
        while True:
            outcome: _core.Outcome | None = None
            if isinstance(step, Send):
                try:
                    async with self._sem:
                        outcome = await self._http.request(
                            step.method,
                            step.url,
                            json=step.json,
                            headers=step.headers,
                            timeout=self._step_timeout(step),
                        )
                except httpx.HTTPError as exc:
                    outcome = exc
            else:
                await asyncio.sleep(step.seconds)
            try:
                step = exchange.send(outcome)
            except StopIteration as done:
                return done.value

    def session(
        self,
        language: str = "python",
        *,
        ttl_s: float | None = None,
        memory_mb: int | None = None,
        cell_timeout_s: float | None = None,
        files: Mapping[str, str] | None = None,
    ) -> AsyncSessionStart:
        """Make a session (a stateful interpreter) on the next server; its calls all go to that server.
        ``s = await client.session()``, or ``async with client.session() as s:`` to delete it on leaving the
        block. See :mod:`.sessions`."""
        body = create_body(language, ttl_s, memory_mb, cell_timeout_s, files or {})
        return AsyncSessionStart(self._run, self._core, body)

    async def attach(self, session_id: str, url: str | None = None) -> AsyncSession:
        """A handle on a session made elsewhere (another process, another client): at ``url``, else at the one
        of the client's URLs that holds it (asked in turn)."""
        return AsyncSession(self._run, self._core, await self._run(finding(self._core, session_id, url)), session_id)

    async def languages(self) -> list[LanguageOut]:
        """What this server can run (``GET /v1/languages``)."""
        data = await self.request("GET", "/v1/languages")
        if not isinstance(data, list):
            raise SandboxProtocolError("/v1/languages: the answer is not a list", path="/v1/languages")
        return [_core.parse(LanguageOut, x, "/v1/languages") for x in data]

    async def run_code(self, request: Body) -> RunCodeResponse:
        """``POST /run_code`` (the SandboxFusion face): a ``RunCodeRequest`` or its JSON."""
        return _core.parse(RunCodeResponse, await self.request("POST", "/run_code", request), "/run_code")

    async def execute(self, request: Body) -> ExecuteResponse:
        """``POST /v1/execute``: one program's run."""
        return _core.parse(ExecuteResponse, await self.request("POST", "/v1/execute", request), "/v1/execute")

    async def evaluate(self, request: Body) -> EvaluateResponse:
        """``POST /v1/evaluate``: a group of programs against one test set, alone or in a batch with the other
        groups asked for meanwhile."""
        body = _core.wire(request)
        if not self._core.batched(body):
            return await self._evaluate_alone(body)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[EvaluateResponse] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._flush)  # everything queued before the loop comes back goes together
        self._queued.append((body, future))
        return await future

    async def evaluate_many(self, requests: Sequence[Body]) -> list[EvaluateResponse | SandboxError]:
        """Several groups at once (batched as :meth:`evaluate` does); one answer or error per group, in order."""
        answers = await asyncio.gather(*(self.evaluate(r) for r in requests), return_exceptions=True)
        out: list[EvaluateResponse | SandboxError] = []
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, SandboxError):
                raise answer
            out.append(answer)
        return out

    async def _evaluate_alone(self, body: dict[str, Any]) -> EvaluateResponse:
        return _core.parse(EvaluateResponse, await self.request("POST", "/v1/evaluate", body), "/v1/evaluate")

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        for batch in self._core.batches([body for body, _ in queued]):
            task = asyncio.create_task(self._send([queued[i] for i in batch]))
            self._sending.add(task)  # the loop only keeps a weak reference
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[Queued]) -> None:
        bodies = [body for body, _ in batch]
        answers: list[EvaluateResponse | BaseException] = []
        path = "/v1/evaluate/batch"
        if len(batch) > 1:
            try:
                data = await self.request("POST", path, {"requests": bodies})
                answers = [_core.parse(EvaluateResponse, a, path) for a in _core.batch_answers(data, len(batch), path)]
            except SandboxError as exc:
                if self._core.batch_failed(exc) is None:
                    answers = [exc] * len(batch)
            except Exception as exc:  # handed to every caller waiting on this batch
                answers = [exc] * len(batch)
        if not answers:
            answers = await asyncio.gather(*(self._evaluate_alone(b) for b in bodies), return_exceptions=True)
        for (_, future), answer in zip(batch, answers, strict=True):
            if future.done():
                continue  # its caller went away
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(answer)
