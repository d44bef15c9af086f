"""What the sync and async clients share: URLs, the retry policy, request bodies, batching and parsing.

The exchange of one request is a generator that yields what to do (``Send`` a request, ``Wait`` a while)
and is sent back what happened (a response, or the transport's exception); each client only performs the
steps, with its own I/O. So both clients retry, fail over and give up in exactly the same way.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from ..agent.protocol import PAUSE_SHARE, WAIT_CREDIT
from .exceptions import (
    SandboxError,
    SandboxProtocolError,
    SandboxRejected,
    SandboxUnavailable,
    SessionBusy,
    SessionGone,
    too_large,
)

log = logging.getLogger("codegym.sandbox.client")

M = TypeVar("M", bound=BaseModel)
Body = Mapping[str, Any] | BaseModel
Outcome = httpx.Response | httpx.HTTPError


@dataclass(frozen=True)
class RetryPolicy:
    """When a request is sent again, and after how long.

    A request is retried when the server cannot be reached (any transport error: connect, read, timeout) or
    answers one of ``statuses`` (it is saturated or failing, not refusing the request), up to ``retries``
    times, each time to the next URL. The wait is the server's ``Retry-After`` when it gives one (at most
    ``max_retry_after_s``), else ``backoff_s * 2**attempt`` (at most ``max_backoff_s``) with +-25% jitter,
    so that clients that failed together do not come back together.
    """

    retries: int = 3
    backoff_s: float = 0.25
    max_backoff_s: float = 10.0
    max_retry_after_s: float = 30.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({408, 425, 429, 500, 502, 503, 504}))

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError("retries and backoff_s must be >= 0")

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if retry_after is not None:
            try:
                return max(0.0, min(float(retry_after), self.max_retry_after_s))
            except ValueError:
                pass  # an HTTP date: rare from a sandbox; the backoff serves
        return float(min(self.backoff_s * 2**attempt, self.max_backoff_s) * random.uniform(0.75, 1.25))


@dataclass(frozen=True)
class Send:
    """Send this request; the driver sends back the response or the transport's ``httpx.HTTPError``. ``wait_s``:
    how long the answer may take beyond the client's own timeout (see :func:`judging_s`)."""

    method: str
    url: str
    json: Any
    wait_s: float = 0.0
    headers: Mapping[str, str] | None = None  # beside the client's own


DEFAULT_RUN_S = 10.0  # the server's default run time limit (LIMITS__RUN_TIMEOUT_S), for a body that names none
RUN_GRACE_S = 1.0  # a run's start, its grace past the limit, its report
DEFAULT_CELL_S = 60.0  # the most a cell may ask (SESSIONS__MAX_CELL_TIMEOUT_S), for a body that names no limit
CELL_GRACE_S = 10.0  # past a cell's interruption: its kernel's grace, and the agent taking its box down


def request_timeout(base: float | None, wait_s: float) -> httpx.Timeout | Any:
    """The timeout of one request: the client's own (``base``; None: none), and ``wait_s`` more."""
    if not wait_s or base is None:
        return httpx.USE_CLIENT_DEFAULT
    return httpx.Timeout(base + wait_s, connect=10.0)


def judging_s(path: str, body: Any) -> float:
    """How long an ``/v1/evaluate`` (or ``/batch``) body may take to judge at most, or a session's cell to run:
    every program's every test at its time limit stretched by the wait credit (``agent/protocol.WAIT_CREDIT``),
    one after another, and its compile. A request that holds many slow tests is still being judged past any
    fixed timeout: cutting it off would answer its honest (or its hanging) programs as the sandbox's failure,
    which rewards mask; a cell cut off ends its session."""
    if path == "/v1/evaluate/batch" and isinstance(body, Mapping):
        return sum(judging_s("/v1/evaluate", b) for b in body.get("requests") or [])
    if path.startswith("/v1/sessions/") and path.endswith("/execute") and isinstance(body, Mapping):
        # A cell is interrupted at its limit stretched by its wait for a CPU, and given a grace to answer.
        # ... and it may stand paused, its slot given to cells that waited, up to PAUSE_SHARE of its limit.
        return float(body.get("timeout_s") or DEFAULT_CELL_S) * (1 + WAIT_CREDIT + PAUSE_SHARE) + CELL_GRACE_S
    if path != "/v1/evaluate" or not isinstance(body, Mapping):
        return 0.0
    limits = body.get("limits") or {}
    run_s = float(limits.get("timeout_s") or DEFAULT_RUN_S) * (1 + WAIT_CREDIT) + RUN_GRACE_S
    compile_s = float(limits.get("compile_timeout_s") or 4 * DEFAULT_RUN_S)
    programs, tests = len(body.get("programs") or []), len(body.get("tests") or [])
    return programs * (compile_s + tests * run_s)


@dataclass(frozen=True)
class Wait:
    """Sleep this long before the next step."""

    seconds: float


Step = Send | Wait

# Transport errors raised before any byte of the request left: sending it again cannot run it twice.
UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A server's answer that it did nothing: it was saturated (429, 503).
_REFUSED = (429, 503)


def _unsent(outcome: Outcome | None) -> bool:
    """Whether an attempt surely did nothing at its server: it never left, or the server refused it."""
    if isinstance(outcome, httpx.HTTPError):
        return isinstance(outcome, UNSENT)
    return outcome is not None and outcome.status_code in _REFUSED


@dataclass(frozen=True)
class Call:
    """How one request may be retried. ``resend``: any failure the policy retries may be sent again (the
    request is idempotent, or doing it twice costs nothing lasting); False: only one that never left the
    client (``UNSENT``). ``session_id``: a session's call, whose 404/410/409 raise ``SessionGone``/``SessionBusy``.
    ``key``: an ``Idempotency-Key`` sent with every attempt; an attempt that may have reached its server goes
    there once more (the key makes it the same request there, where another server would do it a second time),
    and the next attempts go on over the URLs."""

    resend: bool = True
    session_id: str | None = None
    key: str | None = None


Exchange = Generator[Step, Outcome | None, Any]


class Core:
    """The state both clients share: URLs (taken in turn), headers, the retry policy, batching's state."""

    def __init__(
        self, urls: str | Sequence[str], *, token: str | None, retry: RetryPolicy | None, batch_runs: int
    ) -> None:
        self.urls = [u.rstrip("/") for u in ([urls] if isinstance(urls, str) else urls)]
        if not self.urls:
            raise ValueError("a sandbox client needs at least one URL")
        if batch_runs < 0:
            raise ValueError("batch_runs must be >= 0")
        self.retry = retry if retry is not None else RetryPolicy()
        self.batch_runs = batch_runs
        self.batchable = True  # until a server says it has no /v1/evaluate/batch
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Loading the CA bundle takes 20-40 ms: only when there is TLS to verify (an http:// URL never leads
        # to https: redirects are not followed).
        self.verify = any(u.lower().startswith("https://") for u in self.urls)
        self._next = itertools.cycle(range(len(self.urls)))
        self._lock = threading.Lock()  # a sync client is shared by threads

    def next_url(self) -> str:
        with self._lock:
            return self.urls[next(self._next)]

    def exchange(self, method: str, path: str, body: Any = None) -> Exchange:
        """One request with the retry policy over the URLs; returns the answer's JSON, raises ``SandboxError``."""
        _, data = yield from self.exchange_at(method, path, body)
        return data

    def exchange_at(
        self, method: str, path: str, body: Any = None, *, url: str | None = None, call: Call | None = None
    ) -> Exchange:
        """One request with the retry policy; returns ``(url, JSON)``: the URL that answered and its answer
        (None for 204). Without ``url``, each attempt goes to the next URL; with it, every attempt goes there
        (a session's server). ``call`` says what may be retried and turns a session's errors into theirs."""
        call = call if call is not None else Call()
        last: SandboxError = SandboxUnavailable("no attempt made", path=path)
        headers = None if call.key is None else {"Idempotency-Key": call.key}
        again: str | None = None  # where a keyed attempt that may have got there went: sent there once more
        for attempt in range(self.retry.retries + 1):
            at = url or again or self.next_url()
            outcome = yield Send(method, at + path, body, judging_s(path, body), headers)
            # Once: a server that failed twice is left for the next (what it may have made ends at its TTL).
            again = None if call.key is None or again is not None or _unsent(outcome) else at
            retry_after: str | None = None
            if isinstance(outcome, httpx.HTTPError):
                last = SandboxUnavailable(f"{at}{path}: {type(outcome).__name__}: {outcome}", url=at, path=path)
                if not (call.resend or isinstance(outcome, UNSENT)):
                    raise last  # it may have reached the server: sending it again could do it twice
            elif outcome is None:
                raise RuntimeError("a Send step needs a response or an exception back")
            elif outcome.status_code == 204:
                return at, None
            elif 200 <= outcome.status_code < 300:
                try:
                    return at, outcome.json()
                except ValueError:
                    message = f"{at}{path}: the answer is not JSON"
                    raise SandboxProtocolError(message, url=at, path=path, status=outcome.status_code) from None
            else:
                status = outcome.status_code
                message = f"{at}{path}: HTTP {status}: {outcome.text[:500]}"
                if call.session_id is not None and status in (404, 409, 410):
                    raise session_error(call.session_id, outcome, url=at, path=path)
                if status not in self.retry.statuses:
                    raise SandboxRejected(message, url=at, path=path, status=status)
                last = SandboxUnavailable(message, url=at, path=path, status=status)
                if not call.resend:
                    raise last  # answered, but the server may have begun it: the caller decides
                retry_after = outcome.headers.get("Retry-After")
            if attempt < self.retry.retries:
                log.warning("sandbox request failed (attempt %d/%d): %s", attempt + 1, self.retry.retries + 1, last)
                yield Wait(self.retry.delay(attempt, retry_after))
        raise last

    def batched(self, body: Mapping[str, Any]) -> bool:
        """Whether a ``/v1/evaluate`` body may share a batch: batching is on and the body is smaller than one."""
        return self.batchable and runs_of(body) < self.batch_runs

    def batches(self, bodies: Sequence[Mapping[str, Any]]) -> list[list[int]]:
        """Indices of ``bodies`` (``/v1/evaluate`` bodies) grouped into batches of up to ``batch_runs`` runs; a
        body as large as a batch, or any body when batching is off or unsupported, goes alone."""
        out: list[list[int]] = []
        batch: list[int] = []
        runs = 0
        for i, body in enumerate(bodies):
            if not self.batched(body):
                out.append([i])
                continue
            batch.append(i)
            runs += runs_of(body)
            if runs >= self.batch_runs:
                out.append(batch)
                batch, runs = [], 0
        if batch:
            out.append(batch)
        return out

    def batch_failed(self, exc: SandboxError) -> Literal["one by one"] | None:
        """What a failed ``/v1/evaluate/batch`` means: its groups go one by one (the server has no batches,
        or this batch is too large for it: each group is valid on its own), or None: the error stands."""
        if isinstance(exc, SandboxRejected) and exc.status in (404, 405):
            log.warning("the sandbox has no /v1/evaluate/batch (HTTP %s): groups go one by one", exc.status)
            self.batchable = False
            return "one by one"
        if too_large(exc):
            return "one by one"  # over its max_runs_per_request or body limit: batches are tried again later
        return None


def runs_of(body: Mapping[str, Any]) -> int:
    """Programs x tests of a ``/v1/evaluate`` body."""
    return len(body["programs"]) * len(body["tests"])


def session_error(session_id: str, response: httpx.Response, *, url: str, path: str) -> SandboxRejected:
    """A session call's 404/410 (``SessionGone``) or 409 (``SessionBusy``), with the server's detail."""
    ran = False
    try:
        body = response.json()
        detail, ran = str(body.get("detail", "")), body.get("ran") is True
    except (ValueError, AttributeError):
        detail = response.text[:500]
    status = response.status_code
    message = f"{url}{path}: HTTP {status}: {detail}"
    if status == 409:
        return SessionBusy(message, url=url, path=path, status=status, session_id=session_id, detail=detail)
    return SessionGone(message, url=url, path=path, status=status, session_id=session_id, detail=detail, ran=ran)


def wire(body: Body) -> dict[str, Any]:
    """A request body as JSON: a model dumped without its unset optional fields, a mapping as it is."""
    if isinstance(body, BaseModel):
        return body.model_dump(mode="json", exclude_none=True)
    return dict(body)


def parse(model: type[M], data: Any, path: str) -> M:
    """The answer as ``model``; a body that is not the API's raises ``SandboxProtocolError``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SandboxProtocolError(f"{path}: the answer is not a {model.__name__}: {exc}", path=path) from None


def batch_answers(data: Any, n: int, path: str) -> list[Any]:
    """The ``responses`` of a ``/v1/evaluate/batch`` answer for ``n`` groups."""
    answers = data.get("responses") if isinstance(data, Mapping) else None
    if not isinstance(answers, list) or len(answers) != n:
        raise SandboxProtocolError(f"{path}: a batch of {n} groups came back with a broken answer", path=path)
    return answers
