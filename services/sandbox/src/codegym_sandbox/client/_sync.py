"""``SandboxClient``: the blocking client (scripts, thread pools)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ..api.fusion_models import RunCodeResponse
from ..models import EvaluateResponse, ExecuteResponse, LanguageOut
from . import _core
from ._core import Body, Core, RetryPolicy, Send
from .exceptions import SandboxError, SandboxProtocolError
from .sessions import Session, create_body, finding, opening

DEFAULT_URL = "http://127.0.0.1:8080"


class SandboxClient:
    """Blocking client of one or more sandbox servers (see the package's docstring).

    ``transport=httpx.ASGITransport(app)`` is async-only; a blocking test transport is
    ``httpx.MockTransport`` or ``fastapi.testclient.TestClient``'s. Safe to share between threads.
    """

    def __init__(
        self,
        urls: str | Sequence[str] = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float | None = 120.0,
        retry: RetryPolicy | None = None,
        batch_runs: int = 64,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._core = Core(urls, token=token, retry=retry, batch_runs=batch_runs)
        self._timeout_s = timeout
        self._http = httpx.Client(
            headers=self._core.headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=transport,
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

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, body: Body | None = None) -> Any:
        """``method path`` with the retry policy; the answer's JSON. Raises ``SandboxError``."""
        return self._run(self._core.exchange(method, path, None if body is None else _core.wire(body)))

    def _run(self, exchange: _core.Exchange) -> Any:
        """Perform an exchange's steps; its answer."""
        try:
            step = next(exchange)
        except StopIteration as done:  # answered without a request
            return done.value
        while True:
            outcome: _core.Outcome | None = None
            if isinstance(step, Send):
                try:
                    outcome = self._http.request(
                        step.method, step.url, json=step.json, headers=step.headers, timeout=self._step_timeout(step)
                    )
                except httpx.HTTPError as exc:
                    outcome = exc
            else:
                time.sleep(step.seconds)
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
    ) -> Session:
        """Make a session (a stateful interpreter) on the next server; its calls all go to that server.
        ``with client.session() as s:`` deletes it on leaving the block. See :mod:`.sessions`."""
        body = create_body(language, ttl_s, memory_mb, cell_timeout_s, files or {})
        url, created = self._run(opening(self._core, body))
        return Session(self._run, self._core, url, created.session_id, created.expires_at)

    def attach(self, session_id: str, url: str | None = None) -> Session:
        """A handle on a session made elsewhere (another process, another client): at ``url``, else at the one
        of the client's URLs that holds it (asked in turn)."""
        return Session(self._run, self._core, self._run(finding(self._core, session_id, url)), session_id)

    def languages(self) -> list[LanguageOut]:
        """What this server can run (``GET /v1/languages``)."""
        data = self.request("GET", "/v1/languages")
        if not isinstance(data, list):
            raise SandboxProtocolError("/v1/languages: the answer is not a list", path="/v1/languages")
        return [_core.parse(LanguageOut, x, "/v1/languages") for x in data]

    def run_code(self, request: Body) -> RunCodeResponse:
        """``POST /run_code`` (the SandboxFusion face): a ``RunCodeRequest`` or its JSON."""
        return _core.parse(RunCodeResponse, self.request("POST", "/run_code", request), "/run_code")

    def execute(self, request: Body) -> ExecuteResponse:
        """``POST /v1/execute``: one program's run."""
        return _core.parse(ExecuteResponse, self.request("POST", "/v1/execute", request), "/v1/execute")

    def evaluate(self, request: Body) -> EvaluateResponse:
        """``POST /v1/evaluate``: a group of programs against one test set."""
        return _core.parse(EvaluateResponse, self.request("POST", "/v1/evaluate", request), "/v1/evaluate")

    def evaluate_many(self, requests: Sequence[Body]) -> list[EvaluateResponse | SandboxError]:
        """Several groups, small ones together in ``/v1/evaluate/batch`` requests of up to ``batch_runs`` runs;
        one answer per group, in order, or the error that kept its request from being answered."""
        bodies = [_core.wire(r) for r in requests]
        out: list[EvaluateResponse | SandboxError] = []
        for batch in self._core.batches(bodies):
            out += self._batch([bodies[i] for i in batch])
        return out

    def _batch(self, bodies: list[dict[str, Any]]) -> list[EvaluateResponse | SandboxError]:
        if len(bodies) > 1:
            path = "/v1/evaluate/batch"
            try:
                data = self.request("POST", path, {"requests": bodies})
                return [_core.parse(EvaluateResponse, a, path) for a in _core.batch_answers(data, len(bodies), path)]
            except SandboxError as exc:
                if self._core.batch_failed(exc) is None:
                    return [exc] * len(bodies)
        out: list[EvaluateResponse | SandboxError] = []
        for body in bodies:
            try:
                out.append(self.evaluate(body))
            except SandboxError as exc:
                out.append(exc)
        return out
