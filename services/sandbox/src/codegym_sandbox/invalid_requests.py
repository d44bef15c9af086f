"""The answer to a request that does not validate, as both services write it: FastAPI's 422 (each error's type,
where, what), less what would quote the client's data back.

FastAPI's own handler quotes each error's ``input``, the request's own data, which the client holds: a body of a
million tests made a walk of tens of seconds on the event loop and an answer five times the body (round 60); and a
mapping's key in an error's place is the client's own string (round 63: a 64 MB key quoted whole made a 320 MB
answer). The evaluator's job service had FastAPI's handler still (round 64).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from .quoting import QUOTED, cut

# The errors a 422 names at most: a body of a million wrong items is as many errors.
ERRORS_SHOWN = 20


async def answer(_: Request, exc: Exception) -> JSONResponse:
    """The handler of :class:`RequestValidationError` (``app.add_exception_handler``)."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": errors(exc.errors())}, 422)


def errors(found: Sequence[Any]) -> list[Any]:
    """A 422's errors without their ``input``, each key of the client's in an error's place cut: the first
    ``ERRORS_SHOWN``, and how many more there were."""
    shown = [
        {
            k: _cut_loc(v) if k == "loc" else _said(v) if k == "ctx" else v
            for k, v in err.items()
            if k not in ("input", "url")
        }
        for err in found[:ERRORS_SHOWN]
    ]
    detail = _finite(jsonable_encoder(shown))  # a NaN or infinite bound in a ``ctx`` cannot break the JSON
    assert isinstance(detail, list)
    if len(found) > ERRORS_SHOWN:
        more = f"and {len(found) - ERRORS_SHOWN} more errors of the request's body"
        detail.append({"type": "value_error", "loc": ["body"], "msg": more})
    return detail


def _cut_loc(loc: Sequence[Any]) -> list[Any]:
    """An error's place, each key of the client's in it ``quoting.QUOTED`` characters at most."""
    return [cut(part) if isinstance(part, str) else part for part in loc]


def _said(ctx: object) -> object:
    """An error's context, an exception in it as what it says (``jsonable_encoder`` wrote ``{}`` for one), cut as a
    message is: a validator's message may hold what the client sent."""
    if not isinstance(ctx, dict):
        return ctx
    return {k: cut(str(v), 4 * QUOTED) if isinstance(v, BaseException) else v for k, v in ctx.items()}


def _finite(value: object) -> object:
    """``value`` with every NaN or infinite float replaced by its name, so that it is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
