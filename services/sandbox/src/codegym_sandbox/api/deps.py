"""FastAPI dependencies shared by the routes (async: a sync dependency costs a trip through a thread pool)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ..executor import Executor
from ..metrics import Metrics


async def get_executor(request: Request) -> Executor:
    return request.app.state.executor  # type: ignore[no-any-return]


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics  # type: ignore[no-any-return]


def client_of(request: Request) -> str:
    """Who a request came from, as the per-client limits tell clients apart: its address."""
    return request.client.host if request.client else "unknown"


async def get_client(request: Request) -> str:
    return client_of(request)


ExecutorDep = Annotated[Executor, Depends(get_executor)]
ClientDep = Annotated[str, Depends(get_client)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
