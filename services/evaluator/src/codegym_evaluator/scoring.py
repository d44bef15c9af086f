"""Judging programs through the sandbox: one ``/v1/evaluate`` request per group, bounded, retried.

A sandbox error (the sandbox answered SE, failed, or could not be reached after the retries) is a
verdict of its own, ``SE``: never an exception and never a wrong answer, so a trainer can mask it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx
from codegym_sandbox.models import EvaluateRequest, EvaluateResponse, ExecuteResponse, ProgramOut
from pydantic import ValidationError

from .extract import Extracted, extract_code
from .tasks import Task
from .tasks.prompt_helpers import with_prompt_helpers

log = logging.getLogger("codegym.evaluator")

SE = "SE"
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


@dataclass
class Score:
    """One completion's result against its task's tests."""

    verdict: str  # AC, WA, TLE, MLE, RE, CE, OLE, SE
    passed: int
    total: int
    test_verdicts: list[str]
    code: str
    fenced: bool
    wall_s: float
    error: str | None = None  # why the sandbox failed, for SE

    @property
    def sandbox_error(self) -> bool:
        """The infrastructure failed; the program was not judged."""
        return self.verdict == SE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Execution:
    """One program's run through ``/v1/execute``."""

    verdict: str
    stdout: str
    stderr: str
    exit_code: int | None
    error: str | None = None

    @property
    def sandbox_error(self) -> bool:
        """The infrastructure failed; the program was not judged."""
        return self.verdict == SE


class SandboxUnavailable(Exception):
    """Every attempt failed; the message says how the last one did (``status``: its HTTP status, if any)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def build_program(task: Task, code: str) -> str:
    """The program the sandbox runs: the task's starter code followed by the model's code."""
    if not task.starter_code:
        return code
    sep = "" if task.starter_code.endswith("\n") else "\n"
    return f"{task.starter_code}{sep}{code}"


def evaluate_body(task: Task, programs: list[str], *, timeout_s: float, early_stop: bool = False) -> dict[str, Any]:
    """The ``/v1/evaluate`` request for ``programs`` against ``task``'s tests; bad tests raise naming the task."""
    tests = task.tests
    if task.kind == "assert" and task.starter_code and task.language in ("python", "py", "python3"):
        # The prompt's helpers (HumanEval's poly, LeetCode's list_node) are the tests' own, not the program's.
        helpers = [with_prompt_helpers(task.starter_code, task.entry_point, t.get("assert_code", "")) for t in tests]
        tests = [{**t, "assert_code": h} if "assert_code" in t else t for t, h in zip(tests, helpers, strict=True)]
    body: dict[str, Any] = {
        "language": task.language,
        "programs": programs,
        "tests": tests,
        "early_stop": early_stop,
        "limits": {"timeout_s": timeout_s},
    }
    if task.kind == "call":
        body["function"] = task.entry_point
    for key in ("comparison", "rel_tol", "abs_tol"):
        if key in task.metadata:
            body[key] = task.metadata[key]
    try:
        EvaluateRequest.model_validate(body)
    except ValidationError as exc:
        raise ValueError(f"task {task.task_id!r} does not make a valid sandbox request: {exc}") from None
    return body


class Scorer:
    """Async client that judges completions through one or more sandbox servers.

    ``concurrency`` bounds requests in flight (over all URLs); each failed request is retried ``retries``
    times with exponential backoff (honouring ``Retry-After``), moving on to the next URL. Programs that
    come back SE are retried the same way. ``transport`` lets tests run a sandbox app in-process.
    ``early_stop`` stops a program at its first failing test (faster; partial credit is then lost);
    ``which`` picks the first or last fenced block of a completion.

    Groups scored at the same time (``evaluate_completions`` starts every task's at once) that are smaller
    than ``batch_runs`` (programs x tests) go to the sandbox together, up to that many runs per request
    (``/v1/evaluate/batch``): an evaluation with few samples per task then costs a request per batch, not
    per task, and the sandbox judges their assert tests together. ``batch_runs=0`` sends each group alone.
    """

    def __init__(
        self,
        sandbox_url: str | Sequence[str],
        *,
        token: str | None = None,
        concurrency: int = 8,
        retries: int = 3,
        timeout_per_test: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        early_stop: bool = False,
        backoff_s: float = 0.25,
        request_timeout_s: float = 600.0,
        which: Literal["first", "last"] = "last",
        batch_runs: int = 64,
    ) -> None:
        urls = [sandbox_url] if isinstance(sandbox_url, str) else list(sandbox_url)
        if not urls:
            raise ValueError("Scorer needs at least one sandbox URL")
        if concurrency < 1 or retries < 0 or batch_runs < 0:
            raise ValueError("concurrency must be >= 1, retries >= 0 and batch_runs >= 0")
        self.urls = [u.rstrip("/") for u in urls]
        self.retries = retries
        self.timeout_per_test = timeout_per_test
        self.early_stop = early_stop
        self.backoff_s = backoff_s
        self.which: Literal["first", "last"] = which
        self.batch_runs = batch_runs
        self._batchable = True  # until a server says it has no /v1/evaluate/batch
        self._queued: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._sending: set[asyncio.Task[None]] = set()
        self._next = itertools.cycle(range(len(self.urls)))
        self._sem = asyncio.Semaphore(concurrency)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx.Timeout(request_timeout_s, connect=10.0)
        # As many connections as requests in flight, kept alive: a larger pool only costs the client CPU
        # (httpcore looks at every pooled connection for every request).
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        # Loading the CA bundle takes 20-40 ms, a tenth of a small evaluation: only when there is TLS to verify
        # (an http:// URL never leads to https: redirects are not followed).
        verify = any(u.lower().startswith("https://") for u in self.urls)
        self._http = httpx.AsyncClient(
            headers=headers, timeout=timeout, transport=transport, limits=limits, verify=verify
        )

    async def __aenter__(self) -> Scorer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            try:
                return min(float(retry_after), 30.0)
            except ValueError:
                pass
        return float(min(self.backoff_s * 2**attempt, 10.0) * random.uniform(0.75, 1.25))

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries over the URLs; raises ``SandboxUnavailable`` when every attempt failed."""
        error = "no attempt made"
        for attempt in range(self.retries + 1):
            url = self.urls[next(self._next)] + path
            retry_after: str | None = None
            try:
                async with self._sem:
                    response = await self._http.post(url, json=body)
            except httpx.HTTPError as exc:
                error = f"{url}: {type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    result: dict[str, Any] = response.json()
                    return result
                error = f"{url}: HTTP {response.status_code}: {response.text[:500]}"
                if response.status_code not in _RETRY_STATUS:
                    raise SandboxUnavailable(error, response.status_code)
                retry_after = response.headers.get("Retry-After")
            if attempt < self.retries:
                log.warning("sandbox request failed (attempt %d/%d): %s", attempt + 1, self.retries + 1, error)
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise SandboxUnavailable(error)

    async def _evaluate(self, body: dict[str, Any]) -> dict[str, Any]:
        """``/v1/evaluate`` for ``body``: alone, or in a batch with the other groups queued meanwhile."""
        if _runs(body) >= self.batch_runs or not self._batchable:
            return await self._post("/v1/evaluate", body)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if not self._queued:
            # Everything queued before the event loop comes back to this goes in the same batches.
            asyncio.get_running_loop().call_soon(self._flush)
        self._queued.append((body, future))
        return await future

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        batch: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        runs = 0
        for i, (body, future) in enumerate(queued):
            batch.append((body, future))
            runs += _runs(body)
            if runs >= self.batch_runs or i == len(queued) - 1:
                task = asyncio.create_task(self._send(batch))
                self._sending.add(task)  # the loop only keeps a weak reference
                task.add_done_callback(self._sending.discard)
                batch, runs = [], 0

    async def _send(self, batch: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]]) -> None:
        bodies = [body for body, _ in batch]
        responses: list[Any] = []
        alone = len(batch) == 1 or not self._batchable
        try:
            if not alone:
                try:
                    answer = (await self._post("/v1/evaluate/batch", {"requests": bodies})).get("responses")
                    if not isinstance(answer, list) or len(answer) != len(batch):
                        raise SandboxUnavailable(f"a batch of {len(batch)} groups came back with a broken answer")
                    responses = answer
                except SandboxUnavailable as exc:
                    if exc.status in (404, 405):
                        log.warning("the sandbox has no /v1/evaluate/batch (HTTP %s): groups go one by one", exc.status)
                        self._batchable = False
                    elif exc.status not in (413, 422):
                        raise
                    # A batch too large for this server (its max_runs_per_request or body limit): its groups,
                    # each valid on its own, go one by one.
                    alone = True
            if alone:
                responses = await asyncio.gather(
                    *(self._post("/v1/evaluate", b) for b in bodies), return_exceptions=True
                )
        except Exception as exc:
            responses = [exc] * len(batch)
        for (_, future), response in zip(batch, responses, strict=True):
            if future.done():
                continue  # its caller went away
            if isinstance(response, BaseException):
                future.set_exception(response)
            else:
                future.set_result(response)

    async def score_group(self, task: Task, completions: list[str], *, extract: bool = True) -> list[Score]:
        """Judge every completion of one task in one request, or in a batch with other small groups (see
        ``batch_runs``); identical programs are sent once."""
        if not completions:
            return []
        pieces = [extract_code(c, task, which=self.which) if extract else Extracted(c, False) for c in completions]
        programs = [build_program(task, p.code) for p in pieces]
        unique = list(dict.fromkeys(programs))
        results: dict[str, ProgramOut | str] = {}  # a program's result, or why the sandbox failed
        pending = unique
        for attempt in range(self.retries + 1):
            body = evaluate_body(task, pending, timeout_s=self.timeout_per_test, early_stop=self.early_stop)
            try:
                response = EvaluateResponse.model_validate(await self._evaluate(body))
            except (SandboxUnavailable, ValidationError, ValueError) as exc:
                results.update(dict.fromkeys(pending, f"sandbox unavailable: {exc}"))
                break  # _post already retried
            for program, out in zip(pending, response.results, strict=True):
                results[program] = out
            pending = [p for p, out in zip(pending, response.results, strict=True) if out.verdict.value == SE]
            if not pending or attempt == self.retries:
                break
            await asyncio.sleep(self._delay(attempt))
        total = len(task.tests)
        return [_score(results[prog], piece, total) for prog, piece in zip(programs, pieces, strict=True)]

    async def execute_many(self, codes: list[str], language: str = "python") -> list[Execution]:
        """Run each program once (no input) through ``/v1/execute``, concurrently."""
        return list(await asyncio.gather(*(self._execute(code, language) for code in codes)))

    async def _execute(self, code: str, language: str) -> Execution:
        body = {"language": language, "code": code, "limits": {"timeout_s": self.timeout_per_test}}
        last = Execution(SE, "", "", None, "no attempt made")
        for attempt in range(self.retries + 1):
            try:
                response = ExecuteResponse.model_validate(await self._post("/v1/execute", body))
            except (SandboxUnavailable, ValidationError, ValueError) as exc:
                return Execution(SE, "", "", None, f"sandbox unavailable: {exc}")
            step = response.run or response.compile
            last = Execution(
                verdict=response.verdict.value,
                stdout=step.stdout if step else "",
                stderr=step.stderr if step else "",
                exit_code=step.exit_code if step else None,
                error=step.error if step and response.verdict.value == SE else None,
            )
            if not last.sandbox_error or attempt == self.retries:
                break
            await asyncio.sleep(self._delay(attempt))
        return last


def _runs(body: dict[str, Any]) -> int:
    """Programs x tests of a ``/v1/evaluate`` body."""
    return len(body["programs"]) * len(body["tests"])


def _score(result: ProgramOut | str, piece: Extracted, total: int) -> Score:
    if isinstance(result, str):
        return Score(SE, 0, total, [], piece.code, piece.fenced, 0.0, error=result)
    wall = sum(t.wall_s for t in result.tests) + (result.compile.wall_s if result.compile else 0.0)
    test_verdicts = [t.verdict.value for t in result.tests]  # the sandbox's judge decides every verdict
    verdict = next((v for v in test_verdicts if v != "AC"), "AC") if result.verdict.value != "CE" else "CE"
    error = None
    if verdict == SE:
        error = next((t.stderr for t in result.tests if t.verdict.value == SE), "") or "sandbox error"
    return Score(
        verdict=verdict,
        passed=result.passed,
        total=result.total,
        test_verdicts=test_verdicts,
        code=piece.code,
        fenced=piece.fenced,
        wall_s=wall,
        error=error,
    )
