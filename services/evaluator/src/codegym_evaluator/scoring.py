"""Judging completions through the sandbox client: one ``/v1/evaluate`` group per task, bounded, retried.

A sandbox error (the sandbox answered SE, failed, or could not be reached after the retries) is a
verdict of its own, ``SE``: never an exception and never a wrong answer, so a trainer can mask it. SE is never
the program's doing: a group the sandbox refuses for its size is split down to single programs, and a program
refused alone, where the task's tests alone are taken, is the program's failure (``CE``, its ``error`` says why).
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx
from codegym_sandbox.client import AsyncSandboxClient, RetryPolicy, SandboxError, too_large
from codegym_sandbox.models import EvaluateRequest, ExecuteResponse, ProgramOut
from codegym_sandbox.verdicts import Verdict
from pydantic import ValidationError

from codegym_evaluator import python_syntax

from .ask_again import AskAgain
from .extract import Extracted, extract_code
from .messages import writable
from .tasks import Task
from .tasks.prompt_helpers import with_prompt_helpers
from .tasks.rules import JUDGE_KEYS


@dataclass
class Score:
    """One completion's result against its task's tests."""

    verdict: Verdict
    passed: int
    total: int
    test_verdicts: list[Verdict]
    code: str
    fenced: bool
    wall_s: float
    error: str | None = None  # why it was not run: the sandbox failed (SE), or refused the program (CE)

    def __post_init__(self) -> None:
        # A score read back from JSON (``results.score_of``) holds the verdicts' strings: made Verdicts here.
        self.verdict = Verdict(self.verdict)
        self.test_verdicts = [Verdict(v) for v in self.test_verdicts]

    @property
    def sandbox_error(self) -> bool:
        """The infrastructure failed; the program was not judged."""
        return self.verdict is Verdict.SE

    @property
    def judged(self) -> bool:
        """Whether every test of the program was judged: the sandbox failed neither the program nor any one test
        (a test it could not run after another failed leaves the verdict WA, and its count would pay a right
        program less). The one predicate of every reward: an unjudged score is None (masked), never a 0."""
        return not self.sandbox_error and Verdict.SE not in self.test_verdicts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunOutput:
    """What one program did when run once, with no tests, through ``/v1/execute``: verdict and outputs."""

    verdict: Verdict
    stdout: str
    stderr: str
    exit_code: int | None
    error: str | None = None

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)  # a verdict's string (``"AC"``) is taken as its Verdict

    @property
    def sandbox_error(self) -> bool:
        """The infrastructure failed; the program was not judged."""
        return self.verdict is Verdict.SE


@dataclass(frozen=True)
class Unavailable:
    """A program the sandbox could not be asked to judge (unreachable after the client's retries): SE."""

    error: str
    verdict: Verdict = Verdict.SE


@dataclass(frozen=True)
class Refused:
    """A program the sandbox refuses alone for its size while it takes the task's tests without it: the program
    is too large to be judged, its own failure (CE), never the sandbox's (SE)."""

    error: str
    verdict: Verdict = Verdict.CE


Answer = ProgramOut | Unavailable | Refused


def build_program(task: Task, code: str) -> str:
    """The program the sandbox runs: the task's starter code followed by the model's code. A call task whose
    harness calls ``Solution().<fn>`` for a program that writes ``class Solution`` (APPS's: its rule's
    ``solution_class``) binds ``<fn>`` to that method after such a program, as the harness would call it."""
    program = with_starter(task.starter_code, writable(code))
    fn = task.entry_point
    if task.kind == "call" and task.metadata.get("solution_class") and fn and "class Solution" in code:
        program += f"\n\n{fn} = Solution().{fn}\n"
    return program


def with_starter(starter: str, code: str) -> str:
    """``starter`` followed by ``code``, whose ``from __future__`` imports go first: they must open the file, and
    the starter put them out of place (an honest ``from __future__ import annotations`` was a SyntaxError)."""
    if not starter:
        return code
    futures, code = _futures(code)
    sep = "" if starter.endswith("\n") else "\n"
    return f"{futures}{starter}{sep}{code}"


def _futures(code: str) -> tuple[str, str]:
    """The ``from __future__`` imports that open ``code`` (after its docstring), and the rest of it (none where
    ``code`` is too long to read: ``python_syntax.MAX_READ_CHARS``)."""
    if len(code) > python_syntax.MAX_READ_CHARS:
        return "", code
    try:
        body = python_syntax.parse(code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "", code
    first = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
    leading = []
    for node in body[first:]:
        if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        leading.append(node)
    if not leading:
        return "", code
    lines = python_syntax.lines(code)
    taken = {i for node in leading for i in range(node.lineno - 1, (node.end_lineno or node.lineno))}
    futures = "".join(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in sorted(taken))
    return futures, "".join(line for i, line in enumerate(lines) if i not in taken)


class InvalidTask(ValueError):
    """A task whose tests make no request the sandbox would take (a reward masks it: None). Its own class, so
    that nothing else a program's scoring raises reads as the task's: any ``ValueError`` did, and one completion
    that made its extraction raise masked its whole group's rewards (round 58)."""


def evaluate_body(
    task: Task, programs: list[str], *, timeout_s: float, cache: bool, early_stop: bool = False
) -> dict[str, Any]:
    """The ``/v1/evaluate`` request for ``programs`` against ``task``'s tests; bad tests raise naming the task.
    ``cache`` has no default: a reward, a pass@k or a rollout's feedback must run its own program afresh (a cached
    answer is another run's, a flaky program's one draw), and no caller gets the cache by leaving it out."""
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
    if not cache:
        body["cache"] = False
    if task.kind == "call" or (task.kind == "assert" and task.entry_point and task.entry_point.isidentifier()):
        body["function"] = task.entry_point  # an assert task's: the program's even where a builtin has its name
    for key in JUDGE_KEYS:  # the task's rule (``tasks.rules``) and tolerances
        if key in task.metadata:
            body[key] = task.metadata[key]
    try:
        EvaluateRequest.model_validate(body)
    except ValidationError as exc:
        raise InvalidTask(f"task {task.task_id!r} does not make a valid sandbox request: {exc}") from None
    return body


def execute_body(language: str, code: str, *, timeout_s: float, cache: bool) -> dict[str, Any]:
    """The ``/v1/execute`` request that runs ``code`` once, with no input. ``cache`` has no default, as
    :func:`evaluate_body`'s: the wire's default is the cache's, and no reward may get it by leaving it out."""
    return {"language": language, "code": code, "limits": {"timeout_s": timeout_s}, "cache": cache}


class Scorer:
    """Judges completions of tasks through the sandbox client: extraction, programs, verdicts into ``Score``.

    It owns an :class:`~codegym_sandbox.client.AsyncSandboxClient` over ``sandbox_url`` (one URL or several),
    which carries the HTTP side: ``concurrency`` requests in flight over all URLs, each failed request retried
    ``retries`` times with exponential backoff from ``backoff_s`` (honouring ``Retry-After``) on the next URL,
    groups smaller than ``batch_runs`` (programs x tests) scored at the same time sent together
    (``/v1/evaluate/batch``; ``batch_runs=0`` sends each group alone), and ``transport`` for tests that run a
    sandbox app in-process. Programs that come back SE are asked again, ``retries`` times, as
    :class:`~codegym_evaluator.ask_again.AskAgain` decides for every route.
    ``early_stop`` stops a program at its first failing test (faster; partial credit is then lost);
    ``which`` picks the first or last fenced block of a completion; ``cache=True`` lets the sandbox answer a
    program it ran before from its result cache (to score the same completions again). Off by default: a reward,
    or a pass@k, must judge every sample afresh, or a program whose answer was a lucky guess once (``os.urandom``,
    the time) is paid again for every sample of its text.
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
        cache: bool = False,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        retry = RetryPolicy(retries=retries, backoff_s=backoff_s)
        self.client = AsyncSandboxClient(
            sandbox_url,
            token=token,
            timeout=request_timeout_s,
            retry=retry,
            batch_runs=batch_runs,
            concurrency=concurrency,
            transport=transport,
        )
        self.timeout_per_test = timeout_per_test
        self.early_stop = early_stop
        self.which: Literal["first", "last"] = which
        self.cache = cache
        self.ask_again = AskAgain(retry)

    @property
    def urls(self) -> list[str]:
        return self.client.urls

    async def __aenter__(self) -> Scorer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()

    async def score_group(self, task: Task, completions: list[str], *, extract: bool = True) -> list[Score]:
        """Judge every completion of one task in one request, or in a batch with other small groups (see
        ``batch_runs``). Identical programs each run, unless ``cache`` is on (then one run answers them all): a
        program that draws a random number or reads the clock must be judged once per sample, or one draw is
        every copy's reward."""
        if not completions:
            return []
        pieces = [extract_code(c, task, which=self.which) if extract else Extracted(c, False) for c in completions]
        programs = [build_program(task, p.code) for p in pieces]

        lock = asyncio.Lock()
        alone: list[bool] = []  # whether the task's tests are taken without a program

        async def tests_taken() -> bool:  # asked once for the group, when a program is first refused alone
            async with lock:
                if not alone:
                    alone.append(await self._taken(task))
            return alone[0]

        # A program's key is its place, or with the cache on, the first place of its text: what the cache would
        # answer for a copy is the first copy's answer, so only then may one run stand for them all.
        first: dict[str, int] = {}
        keys = [first.setdefault(prog, i) if self.cache else i for i, prog in enumerate(programs)]

        async def ask(pending: list[int]) -> list[Answer]:
            return await self._judge(task, [programs[i] for i in pending], tests_taken)

        def unavailable(exc: SandboxError) -> Answer:
            return Unavailable(f"sandbox unavailable: {exc}")

        results = await self.ask_again.each(keys, ask, unavailable)
        total = len(task.tests)
        return [_score(results[key], piece, total) for key, piece in zip(keys, pieces, strict=True)]

    async def _judge(self, task: Task, programs: list[str], tests_taken: Callable[[], Awaitable[bool]]) -> list[Answer]:
        """The answers for ``programs`` (one request); a request the server refuses for its size (``too_large``)
        is split in two, down to single programs. A program refused alone is ``Refused`` when ``tests_taken()``
        (the task's tests are taken without it): else the refusal stands, and the group is SE (this server cannot
        judge the task, whatever the program)."""
        body = evaluate_body(
            task, programs, timeout_s=self.timeout_per_test, early_stop=self.early_stop, cache=self.cache
        )
        try:
            return list((await self.client.evaluate(body)).results)
        except SandboxError as exc:
            if not too_large(exc):
                raise
            refusal = exc
        if len(programs) == 1:
            if not await tests_taken():
                raise refusal
            return [Refused(f"the sandbox refuses this program for its size: {refusal}")]
        half = len(programs) // 2
        parts = await asyncio.gather(
            self._judge(task, programs[:half], tests_taken),
            self._judge(task, programs[half:], tests_taken),
            return_exceptions=True,
        )
        for part in parts:  # both halves end before an error of either is raised: none is left running
            if isinstance(part, BaseException):
                raise part
        return [answer for part in parts if not isinstance(part, BaseException) for answer in part]

    async def _taken(self, task: Task) -> bool:
        """Whether the server takes ``task``'s tests with an empty program: what a program refused alone is
        measured against (refused too: the task is what is too large)."""
        body = evaluate_body(task, [""], timeout_s=self.timeout_per_test, early_stop=True, cache=self.cache)
        try:
            await self.client.evaluate(body)
        except SandboxError as exc:
            if too_large(exc):
                return False
            raise
        return True

    async def execute_many(self, codes: list[str], language: str = "python") -> list[RunOutput]:
        """Run each program once (no input) through ``/v1/execute``, concurrently."""
        return list(await asyncio.gather(*(self._execute(code, language) for code in codes)))

    async def _execute(self, code: str, language: str) -> RunOutput:
        body = execute_body(language, code, timeout_s=self.timeout_per_test, cache=self.cache)

        async def ask(_: list[str]) -> list[RunOutput]:
            return [run_output(await self.client.execute(body))]

        def unavailable(exc: SandboxError) -> RunOutput:
            return RunOutput(Verdict.SE, "", "", None, f"sandbox unavailable: {exc}")

        return (await self.ask_again.each([code], ask, unavailable))[code]


def run_output(response: ExecuteResponse) -> RunOutput:
    """An ``/v1/execute`` answer as a ``RunOutput``: its run step (or its compile step, when that failed)."""
    step = response.run or response.compile
    verdict = response.verdict
    return RunOutput(
        verdict=verdict,
        stdout=step.stdout if step else "",
        stderr=step.stderr if step else "",
        exit_code=step.exit_code if step else None,
        error=step.error if step and verdict is Verdict.SE else None,
    )


def _score(result: Answer, piece: Extracted, total: int) -> Score:
    if isinstance(result, (Unavailable, Refused)):
        return Score(result.verdict, 0, total, [], piece.code, piece.fenced, 0.0, error=result.error)
    wall = sum(t.wall_s for t in result.tests) + (result.compile.wall_s if result.compile else 0.0)
    test_verdicts = [t.verdict for t in result.tests]
    verdict = result.verdict  # the sandbox's judge decides every verdict, the program's too
    error = None
    if verdict is Verdict.SE:
        error = next((t.stderr for t in result.tests if t.verdict is Verdict.SE), "") or "sandbox error"
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
