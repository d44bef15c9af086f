"""A typed client for the sandbox; takes an injectable httpx transport so tests can run the app in-process."""

from __future__ import annotations

from typing import Any

import httpx

from .api.fusion_models import RunCodeRequest, RunCodeResponse
from .models import EvaluateRequest, EvaluateResponse, ExecuteRequest, ExecuteResponse


class SandboxClient:
    """Synchronous client. ``transport=httpx.ASGITransport(app)`` talks to an app without a port."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]

    def run_code(self, code: str, language: str = "python", **fields: Any) -> RunCodeResponse:
        req = RunCodeRequest(code=code, language=language, **fields)
        return RunCodeResponse.model_validate(self._post("/run_code", req.model_dump()))

    def execute(self, request: ExecuteRequest) -> ExecuteResponse:
        return ExecuteResponse.model_validate(self._post("/v1/execute", request.model_dump(exclude_none=True)))

    def evaluate(self, request: EvaluateRequest) -> EvaluateResponse:
        return EvaluateResponse.model_validate(self._post("/v1/evaluate", request.model_dump(exclude_none=True)))
