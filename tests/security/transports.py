"""A client transport onto the suite's test server, for clients that take one (the evaluator's Scorer, CodeReward)."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient


def forwarding(client: TestClient, only: frozenset[str] | None = None) -> httpx.MockTransport:
    """A transport that hands every request to ``client``'s server; with ``only``, other paths are 404."""

    def handle(request: httpx.Request) -> httpx.Response:
        if only is not None and request.url.path not in only:
            return httpx.Response(404, json={"detail": "Not Found"})
        kind = request.headers.get("content-type", "application/json")
        r = client.request(request.method, request.url.path, content=request.content, headers={"content-type": kind})
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    return httpx.MockTransport(handle)
