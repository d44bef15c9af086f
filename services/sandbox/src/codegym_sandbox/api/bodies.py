"""The bodies of ``/v1/evaluate`` and its batch, validated a slice of tests at a time on the event loop.

FastAPI validates a body whole, on the event loop, before its route runs. A body's tests are bounded by the
bytes a client may send, not by the runs it may ask for: 262,000 tests were 0.8 s of every client's requests
held, and a body refused at its last test (a 422) cost as much, as often as a client sent one, for nothing run.
These routes take their bodies as parsed JSON (``Unvalidated``: documented as the model, nothing checked) and
validate them here: ``SLICE`` tests at a time, the loop serving others between slices, then the request
around them, whose tests are by then ``Test`` objects that pass through its validation.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, SkipValidation, TypeAdapter, ValidationError

from ..loop_turns import TURN, Turns
from ..models import EvaluateBatchRequest, EvaluateRequest, Test

M = TypeVar("M", bound=BaseModel)

# A route's body as FastAPI parsed it from JSON (any JSON value), its schema documented as the model's. The
# annotation is the model's for the schema alone: a route hands the body to ``evaluate_request`` or
# ``evaluate_batch`` before anything reads it.
Unvalidated = Annotated[M, SkipValidation]

# Tests validated between the loop's turns at others' work (``loop_turns``): some 1 ms of it.
SLICE = TURN

# To its first wrong test: 512 tests, each of 16 unknown keys and 5 wrong fields, were 10,752 errors of one slice, 65
# to 170 ms of the loop a request of 108 KB (round 63).
_TESTS = TypeAdapter(Annotated[list[Test], Field(fail_fast=True)])


async def evaluate_request(body: object, most_runs: int) -> EvaluateRequest:
    """``/v1/evaluate``'s body, validated, or the 422 FastAPI would have answered; refused before any of it is
    validated where it asks for more than ``most_runs`` runs (programs x tests: a body of 30 MB was validated,
    5 s of the loop in slices, and then refused for them: round 59)."""
    programs, tests = _counts(body)
    if programs * tests > most_runs:
        raise too_many_runs(f"{programs} programs x {tests} tests", most_runs, "programs")
    return await _request(body, ("body",), Turns())


async def evaluate_batch(body: object, most_runs: int) -> EvaluateBatchRequest:
    """``/v1/evaluate/batch``'s body: each of its requests as ``evaluate_request``, in turn (a batch of many
    small requests is as many tests as one large one), then the batch around them."""
    if isinstance(body, dict) and isinstance(requests := body.get("requests"), list):
        if (runs := sum(p * t for p, t in map(_counts, requests))) > most_runs:
            raise too_many_runs(f"{runs} runs", most_runs, "requests")
        slices = Turns()
        made = [await _request(r, ("body", "requests", i), slices) for i, r in enumerate(requests)]
        body = {**body, "requests": made}
    return _whole(EvaluateBatchRequest, body, ("body",))


def too_many_runs(what: str, most: int, field: str) -> RequestValidationError:
    """The 422 of a request that asks for more runs than the server's ``max_runs_per_request`` (``what``)."""
    msg = f"{what} is more than the server's max_runs_per_request ({most}): split the request"
    return RequestValidationError([{"type": "value_error", "loc": ["body", field], "msg": msg}])


def _counts(body: object) -> tuple[int, int]:
    """The programs and the tests a request's body holds, as it came (nothing validated), its tests counted as
    runs of one program at least: ``"programs": []``, or no list, once made a body of two million tests runs of
    none, validated a slice at a time into 3 GB before it was refused (round 60)."""
    if not isinstance(body, dict):
        return 0, 0
    programs, tests = body.get("programs"), body.get("tests")
    return max(len(programs) if isinstance(programs, list) else 0, 1), len(tests) if isinstance(tests, list) else 0


async def _request(body: object, loc: tuple[str | int, ...], slices: Turns) -> EvaluateRequest:
    if isinstance(body, dict) and isinstance(tests := body.get("tests"), list):
        made: list[Test] = []
        for start in range(0, len(tests), SLICE):
            part = tests[start : start + SLICE]
            try:
                made += _TESTS.validate_python(part)
            except ValidationError as e:
                # Where FastAPI would say it: the body's path to the test, counted in the whole list.
                errors = e.errors(include_url=False)
                raise RequestValidationError(
                    [{**err, "loc": (*loc, "tests", start + int(err["loc"][0]), *err["loc"][1:])} for err in errors]
                ) from None
            await slices.done(len(part))
        body = {**body, "tests": made}
    await slices.done(1)
    return _whole(EvaluateRequest, body, loc)


def _whole(model: type[M], body: Any, loc: tuple[str | int, ...]) -> M:
    """``body`` validated as ``model``: what is left once its tests are made (the rest of a request is a few
    fields; its tests pass through as the objects they are)."""
    try:
        return model.model_validate(body)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        raise RequestValidationError([{**err, "loc": (*loc, *err["loc"])} for err in errors]) from None
