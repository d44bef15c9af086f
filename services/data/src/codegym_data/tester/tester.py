"""``Tester``: run a program's tests in the codegym sandbox and measure which of its lines they run.

Each program is run twice on every test. Its verdicts are the sandbox judge's, from one ``/v1/evaluate``
request, exactly as ``codegym-eval`` and the trainer get them. Its coverage comes from a second, instrumented
run of each test (``/v1/execute``, see ``instrument``), for the languages that have an instrument.

Coverage is read from what the instrumented run itself writes, so a program can make up its own: it is a
measurement of trusted code (reference solutions, tests under development), never a reward.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from codegym_sandbox import languages
from codegym_sandbox.client import AsyncSandboxClient, SandboxError, SandboxUnavailable
from codegym_sandbox.models import EvaluateRequest, EvaluateResponse, ExecuteResponse, LimitsIn, ProgramOut, Test
from codegym_sandbox.verdicts import Verdict
from pydantic import ValidationError

from .gcov import Gcov
from .instrument import Instrument
from .python_trace import PythonTrace
from .report import LineCoverage, TestReport, TestResult
from .v8 import V8

INSTRUMENTS: dict[str, Callable[[], Instrument]] = {
    "python": PythonTrace,
    "c": lambda: Gcov(languages.LANGUAGES["c"]),
    "cpp": lambda: Gcov(languages.LANGUAGES["cpp"]),
    "nodejs": V8,
}

TestSpec = Test | str | Mapping[str, Any]  # a Test, an assert test's code, or a Test as a dict


class TesterError(RuntimeError):
    """The sandbox refused a request or could not be reached (after the client's retries); the message says
    which and why."""


def as_test(spec: TestSpec) -> Test:
    """A test from its spec: a string is an assert test's code; a mapping has ``Test``'s fields."""
    if isinstance(spec, Test):
        return spec
    if isinstance(spec, str):
        return Test(assert_code=spec)
    return Test.model_validate(dict(spec))


def kind(test: Test) -> str:
    return "stdio" if test.expected_stdout is not None else "call" if test.call is not None else "assert"


class Tester:
    """Runs tests in a codegym sandbox and reports verdicts and line coverage.

    ``url``: a running sandbox; without it (and without ``transport``) a local sandbox is started on loopback
    at the first run and stopped by :meth:`close` (or leaving ``with``). ``transport``: an httpx transport to
    the sandbox app (``httpx.ASGITransport(app=...)`` runs it in-process). ``timeout_s`` limits each judged
    run; an instrumented run may take ``3 * timeout_s + 10`` (tracing slows a program, and C is compiled in
    its run).

    >>> with Tester("http://127.0.0.1:8080") as tester:  # doctest: +SKIP
    ...     report = tester.run("python", "def sq(x):\\n    return x * x\\n", ["assert sq(3) == 9"])
    ...     report.coverage.percent
    100.0
    """

    __test__ = False  # not a pytest class

    def __init__(
        self,
        url: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        token: str | None = None,
        timeout_s: float = 5.0,
        coverage: bool = True,
        concurrency: int = 4,
        request_timeout_s: float = 600.0,
    ) -> None:
        self.url = url if url is not None or transport is None else "http://sandbox"
        self.transport = transport
        self.token = token
        self.timeout_s = timeout_s
        self.coverage = coverage
        self.concurrency = concurrency
        self.request_timeout_s = request_timeout_s
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Tester:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the local sandbox, if this tester started one."""
        self._stack.close()

    def _base_url(self) -> str:
        if self.url is None:
            from codegym_evaluator.servers import sandbox_server

            self.url = self._stack.enter_context(sandbox_server()).url
        return self.url

    def run(
        self,
        language: str,
        code: str,
        tests: Sequence[TestSpec],
        *,
        function: str | None = None,
        comparison: str = "exact",
    ) -> TestReport:
        """Judge ``code`` on ``tests`` and measure its coverage (see :meth:`arun`); not inside an event loop."""
        return asyncio.run(self.arun(language, code, tests, function=function, comparison=comparison))

    async def arun(
        self,
        language: str,
        code: str,
        tests: Sequence[TestSpec],
        *,
        function: str | None = None,
        comparison: str = "exact",
    ) -> TestReport:
        """Every test's verdict, and the lines of ``code`` each covers where ``language`` has coverage.

        ``tests``: stdin tests (``{"stdin": ..., "expected_stdout": ...}``) in any language; for Python also
        assert tests (a string of code run after the program) and call tests (``{"call": [args], "expected":
        value}`` with ``function``). Raises ``ValueError`` for an unknown language or tests it cannot run.
        """
        lang = languages.lookup(language)
        if lang is None:
            raise ValueError(f"unknown language {language!r}; known: {', '.join(languages.LANGUAGES)}")
        try:
            parsed = [as_test(t) for t in tests]
            request = EvaluateRequest(
                language=lang.name,
                programs=[code],
                tests=parsed,
                function=function,
                comparison=comparison,
                limits=LimitsIn(timeout_s=self.timeout_s),
            )
        except ValidationError as exc:
            raise ValueError(f"invalid tests: {exc.errors()[0]['msg']}") from exc
        if not lang.in_process_python and any(t.stdin is None and t.expected_stdout is None for t in parsed):
            raise ValueError(f"{lang.name} runs stdin tests only (assert and call tests need Python)")
        client = AsyncSandboxClient(
            self._base_url(),
            token=self.token,
            transport=self.transport,
            timeout=self.request_timeout_s,
            concurrency=self.concurrency,
        )
        async with client:
            judged = (await _answer(client.evaluate(request))).results[0]
            results = _results(parsed, judged)
            report = TestReport(lang.name, judged.verdict, results, coverage=None)
            if judged.compile is not None and judged.compile.verdict is not Verdict.AC:
                report.compile_error = judged.compile.stderr[-2000:]
            make = INSTRUMENTS.get(lang.name)
            if make is None:
                report.coverage_note = f"not measured: the sandbox has no line-coverage tool for {lang.name}"
            elif not self.coverage:
                report.coverage_note = "not measured (coverage off)"
            elif report.compile_error is not None or judged.verdict is Verdict.SE:
                report.coverage_note = f"not measured: the program was not judged ({judged.verdict})"
            else:
                await self._measure(client, make(), code, parsed, function, report)
        return report

    async def _measure(
        self,
        client: AsyncSandboxClient,
        instrument: Instrument,
        code: str,
        tests: list[Test],
        function: str | None,
        report: TestReport,
    ) -> None:
        limits = LimitsIn(timeout_s=3 * self.timeout_s + 10)  # the client keeps `concurrency` runs in flight

        async def one(test: Test) -> LineCoverage | str:
            run = await _answer(client.execute(instrument.request(code, test, function, limits)))
            return instrument.read(code, run)

        for result, measured in zip(report.tests, await asyncio.gather(*(one(t) for t in tests)), strict=True):
            if isinstance(measured, str):
                result.coverage_error = measured
            else:
                result.coverage = measured
        report.coverage = LineCoverage.union(r.coverage for r in report.tests if r.coverage is not None)
        missing = sum(r.coverage is None for r in report.tests)
        report.coverage_note = instrument.note + (f"; {missing} tests without coverage data" if missing else "")


def _results(tests: list[Test], judged: ProgramOut) -> list[TestResult]:
    """One result per test; a program that did not compile (or could not be judged) has one verdict for all."""
    if len(judged.tests) != len(tests):
        (only,) = judged.tests
        return [TestResult(i, kind(t), only.verdict, 0.0, "", only.stderr) for i, t in enumerate(tests)]
    return [
        TestResult(i, kind(t), out.verdict, out.wall_s, out.stdout, out.stderr)
        for i, (t, out) in enumerate(zip(tests, judged.tests, strict=True))
    ]


T = TypeVar("T", EvaluateResponse, ExecuteResponse)


async def _answer(call: Awaitable[T]) -> T:
    """The client's answer; its errors as ``TesterError``."""
    try:
        return await call
    except SandboxUnavailable as exc:
        raise TesterError(f"the sandbox cannot be reached: {exc}") from exc
    except SandboxError as exc:
        raise TesterError(f"the sandbox answered {exc.status} to {exc.path}: {exc}") from exc
