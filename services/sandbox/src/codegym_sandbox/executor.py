"""From a program and its inputs to step results: compile once, run, cache, measure. Both APIs call
:class:`Executor`; it knows languages, limits and the cache, and nothing about HTTP."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace

from . import languages, pytest_file
from .agent import program_bytes
from .backends.base import Backend, RunOutcome, RunPolicy, RunRequest, SandboxFault
from .cache import LRUCache, cache_key, stdin_digests
from .config import Settings
from .loop_turns import Turns, mapped
from .metrics import Metrics
from .pytest_file import Analyse, on_the_loop
from .quoting import quoted
from .step_limits import COMPILE_MEMORY_MB, fitted_mb
from .step_limits import RunLimits as RunLimits  # the type of its limits, for its callers
from .verdicts import RunEnd, Verdict, memory_exceeded, run_end

SCRATCH = "/tmp/box"


class UnsupportedLanguage(Exception):
    """The language has no runner here, or its toolchain is missing: reported as a SandboxError."""


@dataclass
class StepResult:
    """One compile or run step, in the terms both APIs report."""

    end: RunEnd  # how the process ended: no verdict (a test's is the judge's, judging/judge.py)
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float | None
    max_rss_kb: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    output_exceeded: bool = False
    memory_exceeded: bool = False
    error: str | None = None  # set for SE: what failed in the infrastructure
    cached: bool = False
    collected: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    near_limit: bool = False  # it used NEAR_LIMIT of its time or more: a run again may end otherwise

    @property
    def repeatable(self) -> bool:
        """Whether running it again would give the same verdict, so that it may be cached."""
        return self.end not in _UNREPEATABLE and not self.near_limit

    @property
    def nbytes(self) -> int:
        """What keeping this result costs, about: its outputs, files and error, and its own objects."""
        files = sum(len(name) + len(data) + _OBJECT_BYTES for name, (data, _) in self.collected.items())
        return _STEP_BYTES + len(self.stdout) + len(self.stderr) + len(self.error or "") + files

    @property
    def return_code(self) -> int | None:
        """Exit code, or minus the signal number, as SandboxFusion reports it."""
        if self.exit_code is not None:
            return self.exit_code
        return -self.signal if self.signal is not None else None


# Only outcomes that would repeat are remembered: no fault (luck), no timeout (load), no run that used NEAR_LIMIT of
# its time limit (CPU or wall): its time varies with its neighbours (caches, clock, a sibling hyper-thread) by tens
# of percent, so it is TLE some times, and what it ended with is luck. Half: a rerun may take twice the time.
_UNREPEATABLE = (RunEnd.SANDBOX_ERROR, RunEnd.TIME_LIMIT)
NEAR_LIMIT = 0.5
# Memory of a StepResult with empty outputs beyond the cache's own ENTRY_BYTES (its fields and their
# objects: tracemalloc shows ~310 B), and of each file it holds (the name, the tuple, the dict's slot).
_STEP_BYTES = 320
_OBJECT_BYTES = 160


@dataclass
class Execution:
    compile: StepResult | None
    run: StepResult | None

    @property
    def repeatable(self) -> bool:
        """Whether the same request would give the same answer, so that the answer may be cached."""
        return all(s.repeatable for s in (self.compile, self.run) if s is not None)


def _sandbox_error(message: str) -> StepResult:
    return StepResult(RunEnd.SANDBOX_ERROR, None, None, 0.0, None, None, b"", message.encode(), error=message)


class Executor:
    """Runs programs on a backend, with the result cache in front of it."""

    def __init__(self, backend: Backend, settings: Settings, metrics: Metrics, analyse: Analyse = on_the_loop) -> None:
        self.backend = backend
        self.analyse = analyse
        self.settings = settings
        self.metrics = metrics
        # Bounded by bytes, not only entries: a result holds its whole output (up to LIMITS__OUTPUT_BYTES).
        answers_bytes = settings.cache_bytes // 4
        self.cache: LRUCache[StepResult] = LRUCache(
            settings.cache_entries, settings.cache_bytes - answers_bytes, lambda step: step.nbytes
        )
        # Whole answers by request body, in front of the step cache: a repeated request skips even parsing.
        # It gets the smaller share: a step cache hit still skips the run, which is what costs.
        self.responses: LRUCache[bytes] = LRUCache(settings.cache_entries, answers_bytes, len)
        metrics.track_cache("steps", self.cache)
        metrics.track_cache("answers", self.responses)
        self.runtime_id = backend.runtime_id
        # Defaults and maxima decide what a body's omitted or out-of-range limits mean.
        self.settings_id = settings.limits.model_dump_json()

    def response_key(self, route: str, body: bytes) -> str:
        """Key of a whole answer: the route and the exact body, on this server (its runtime and settings)."""
        return cache_key(self.runtime_id, self.settings_id, route, body)

    # -- limits -------------------------------------------------------------------------------------------
    def run_limits(self, timeout_s: float | None, memory_mb: int | None) -> RunLimits:
        lim = self.settings.limits
        wall = _clamp(timeout_s, lim.run_timeout_s, lim.max_run_timeout_s)
        if memory_mb is None or memory_mb <= 0:  # the server's default: fitted to its budget (step_limits.py)
            return RunLimits(wall, fitted_mb(lim.memory_mb, self.settings, self.backend.memory.total_mb))
        return RunLimits(wall, min(memory_mb, lim.max_memory_mb))

    def compile_limits(self, timeout_s: float | None) -> RunLimits:
        lim = self.settings.limits
        wall = _clamp(timeout_s, lim.compile_timeout_s, lim.max_compile_timeout_s)
        mem = max(lim.max_memory_mb, COMPILE_MEMORY_MB)
        return RunLimits(wall, fitted_mb(mem, self.settings, self.backend.memory.total_mb))

    # -- languages ----------------------------------------------------------------------------------------
    def language(self, name: str) -> languages.Language:
        lang = languages.lookup(name)
        if lang is None:
            why = languages.WITHOUT_RUNNER.get(name)
            reason = f"{f': {why}' if why else ''} (see GET /v1/languages)"
            raise UnsupportedLanguage(f"language {quoted(name)} is not supported by this server{reason}")
        missing = self.missing_tools(lang)
        if missing:
            raise UnsupportedLanguage(f"language {quoted(name)} needs {', '.join(missing)}: not installed here")
        return lang

    def _tool(self, tool: str) -> str | None:
        """Where runs find ``tool``, as the backend's workers reported it (a container has its own)."""
        return self.backend.tools.get(tool)

    def missing_tools(self, lang: languages.Language) -> list[str]:
        return [t for t in lang.tools if self._tool(t) is None]

    def _argv(self, argv: tuple[str, ...], limits: RunLimits) -> list[str]:
        out = [a.replace("{mem}", str(limits.memory_mb)) for a in argv]
        out[0] = f"{SCRATCH}/{out[0][2:]}" if out[0].startswith("./") else self._tool(out[0]) or out[0]
        return out

    def _env(self, lang: languages.Language) -> dict[str, str]:
        return {
            "PATH": languages.RUN_PATH,
            "LANG": "C.UTF-8",
            "HOME": SCRATCH,
            "TMPDIR": SCRATCH,
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            **languages.toolchain_env(lang),
        }

    # -- execution ----------------------------------------------------------------------------------------
    async def execute(
        self,
        language: str,
        code: str,
        stdin: bytes | None,
        files: dict[str, bytes],
        run_limits: RunLimits,
        compile_limits: RunLimits,
        policy: RunPolicy,
        fetch: list[str] = [],  # noqa: B006 - never mutated
    ) -> Execution:
        """Compile (when the language needs it) and run one program on one input, as ``policy`` says."""
        try:
            lang = self.language(language)
        except UnsupportedLanguage as exc:
            self.metrics.runs.labels(language=languages.metric_label(language), verdict=Verdict.SE.value).inc()
            return Execution(None, _sandbox_error(str(exc)))
        if not policy.admitted:  # else its request was admitted whole (a batch's scripts): never one of it refused
            policy = self.backend.admit(policy, alone=True)  # never refused between its compile and its run
        if lang.test_file:  # its program and its tests, each in a process of its own: no exit of it is a pass
            code, stdin = await pytest_file.analysed_run(self.analyse, policy.client, code)
        compiled, sources = await self.build(lang, code, files, compile_limits, policy)
        if compiled is not None and compiled.end is not RunEnd.EXITED:
            return Execution(compiled, None)
        run = await self.run_built(lang, sources, stdin, run_limits, policy, fetch)
        if lang.unjudged and run.end is RunEnd.EXITED:  # its own tests ran in its process: the status is its word
            run = replace(run, end=RunEnd.SANDBOX_ERROR, error=lang.unjudged)
        return Execution(compiled, run)

    async def build(
        self, lang: languages.Language, code: str, files: dict[str, bytes], limits: RunLimits, policy: RunPolicy
    ) -> tuple[StepResult | None, dict[str, tuple[bytes, int]]]:
        """Compile step (None for interpreted languages) and the files every run of the program gets."""
        sources = {name: (data, 0o644) for name, data in files.items()}
        sources.update((name, (text.encode(), 0o644)) for name, text in lang.support.items())
        sources[lang.source] = (program_bytes.encode(code), 0o644)  # every language's one rule
        if lang.compile is None:
            return None, sources
        artifacts = list(lang.artifacts)
        step = await self.step(lang, lang.compile, sources, None, limits, artifacts, policy, compile_step=True)
        if step.end is RunEnd.EXITED:
            # Runs get the artifacts, not the compiler's inputs' side effects.
            return step, {**sources, **step.collected}
        return step, sources

    async def run_built(
        self,
        lang: languages.Language,
        sources: dict[str, tuple[bytes, int]],
        stdin: bytes | None,
        limits: RunLimits,
        policy: RunPolicy,
        fetch: list[str] = [],  # noqa: B006 - never mutated
    ) -> StepResult:
        return await self.step(lang, lang.run, sources, stdin, limits, fetch, policy)

    async def run_tests(
        self,
        lang: languages.Language,
        sources: dict[str, tuple[bytes, int]],
        stdins: list[bytes | None],
        limits: RunLimits,
        policy: RunPolicy,
        shared: bool = False,
        digests: list[str] | None = None,
        files_digest: str = "",
        turns: Turns | None = None,
    ) -> list[StepResult]:
        """:meth:`run_built` for each input, in one exchange with one worker; each result cached on its own.

        ``shared``: other requests run the same ``sources`` (the assert runner), so the worker may keep the
        test series it ran them in open for them (see the agent's ``_run_tests``). ``digests``: the stdins'
        ``cache.stdin_digests``, made once for a request's programs; ``files_digest``: :meth:`files_digest` of
        ``sources``, made once for a program's exchanges; ``turns``: the loop's turns, counted across them."""
        digests = (digests or stdin_digests(stdins)) if policy.cache else []
        # The program's files hashed once for all its tests: hashed in each test's key, a 4 MiB program of 20,000
        # tests held the event loop 46 s (round 57), and once an exchange, 4 s.
        files = (files_digest or self.files_digest(sources)) if digests else ""
        keys = await mapped(lambda d: self._key(lang, lang.run, files, d, limits, []), digests, turns or Turns())
        results: list[StepResult | None] = [self.cache.get(key) for key in keys] or [None] * len(stdins)
        todo = [i for i, hit in enumerate(results) if hit is None]
        self.metrics.cache.labels(result="hit").inc(len(stdins) - len(todo))
        self.metrics.cache.labels(result="miss").inc(len(todo))
        results = [None if hit is None else replace(hit, cached=True) for hit in results]
        if todo:
            request = self.request(lang, lang.run, sources, None, limits, [], compile_step=False)
            request.shared = shared
            started = time.perf_counter()
            try:
                outcomes = await self.backend.run_tests(request, [stdins[i] for i in todo], policy)
                self.metrics.forked_runs.inc(sum(out.forked for out in outcomes))
                fresh = [_step_result(out, limits, request.argv, lang, sources, False) for out in outcomes]
            except SandboxFault as exc:
                fresh = [_sandbox_error(str(exc))] * len(todo)
            except asyncio.CancelledError:
                self.metrics.cancelled_runs.inc(len(todo))  # nothing of them is cached: they never ended
                raise
            each = (time.perf_counter() - started) / len(todo)
            for i, result in zip(todo, fresh, strict=True):
                self.metrics.run_seconds.labels(language=lang.name, kind="run").observe(each)
                self.metrics.runs.labels(language=lang.name, verdict=result.end.verdict.value).inc()
                if keys and result.repeatable:
                    self.cache.put(keys[i], result)
                results[i] = result
        return [r for r in results if r is not None]

    @staticmethod
    def files_digest(files: dict[str, tuple[bytes, int]]) -> str:
        """What stands for a step's files in its key."""
        return cache_key(sorted(files.items()))

    def _key(
        self,
        lang: languages.Language,
        argv: tuple[str, ...],
        files_digest: str,
        stdin_digest: str,
        limits: RunLimits,
        collect: list[str],
    ) -> str:
        """A run's key; ``files_digest``: ``cache_key`` of its files, sorted by name."""
        return cache_key(self.runtime_id, lang.name, argv, files_digest, stdin_digest, limits.wall_s,
                         limits.memory_mb, collect)  # fmt: skip

    def request(
        self,
        lang: languages.Language,
        argv: tuple[str, ...],
        files: dict[str, tuple[bytes, int]],
        stdin: bytes | None,
        limits: RunLimits,
        collect: list[str],
        compile_step: bool,
    ) -> RunRequest:
        return RunRequest(
            files=files,
            argv=self._argv(argv, limits),
            env=self._env(lang),
            # Compilers too: a preprocessor reading /dev/zero grows by gigabytes a second otherwise.
            limits=limits.agent_limits(self.settings, lang.address_space_limit),
            stdin=stdin,
            python=f"{SCRATCH}/{lang.source}" if lang.in_process_python and not compile_step else None,
            collect=collect,
        )

    async def step(
        self,
        lang: languages.Language,
        argv: tuple[str, ...],
        files: dict[str, tuple[bytes, int]],
        stdin: bytes | None,
        limits: RunLimits,
        collect: list[str],
        policy: RunPolicy,
        compile_step: bool = False,
    ) -> StepResult:
        """One sandboxed process: from the cache when the same step ran before and ``policy`` allows it."""
        caching = policy.cache
        key = (
            self._key(lang, argv, self.files_digest(files), stdin_digests([stdin])[0], limits, collect)
            if caching
            else ""
        )
        hit = self.cache.get(key) if caching else None
        kind = "compile" if compile_step else "run"
        if hit is not None:
            self.metrics.cache.labels(result="hit").inc()
            return replace(hit, cached=True)
        self.metrics.cache.labels(result="miss").inc()
        request = self.request(lang, argv, files, stdin, limits, collect, compile_step)
        started = time.perf_counter()
        try:
            outcome = await self.backend.run(request, policy)
            result = _step_result(outcome, limits, request.argv, lang, files, compile_step)
        except SandboxFault as exc:
            result = _sandbox_error(str(exc))
        except asyncio.CancelledError:
            self.metrics.cancelled_runs.inc()  # nothing is cached: the run never ended
            raise
        self.metrics.run_seconds.labels(language=lang.name, kind=kind).observe(time.perf_counter() - started)
        self.metrics.runs.labels(language=lang.name, verdict=result.end.verdict.value).inc()
        if caching and result.repeatable:
            self.cache.put(key, result)
        return result


def _clamp(value: float | None, default: float, maximum: float) -> float:
    """A requested limit: the default when absent, zero, negative or NaN; at most the maximum."""
    if value is None or not value > 0:  # NaN compares false with everything: never let it reach a deadline
        return default
    return min(value, maximum)


def _step_result(
    out: RunOutcome,
    limits: RunLimits,
    argv: list[str],
    lang: languages.Language,
    files: dict[str, tuple[bytes, int]],
    compile_step: bool,
) -> StepResult:
    """A finished process as a step, with the end :func:`run_end` gives it."""
    mem = memory_exceeded(out.stderr, out.exit_code, out.signal, out.max_rss_kb, limits.memory_mb)
    own_file = argv[0].startswith(f"{SCRATCH}/")
    # What the source asked for (Rust's `#![crate_type = "lib"]`) may be no program: then it did not compile.
    unrunnable = languages.unrunnable(lang, out.collected, files) if compile_step and out.exit_code == 0 else None
    end = run_end(out, mem, own_file, compile_step=compile_step, no_program=unrunnable is not None,
                  python=lang.in_process_python and not compile_step)  # fmt: skip
    failed = out.launch_error if end is RunEnd.SANDBOX_ERROR else None
    stderr = out.stderr  # a program that could not start says why where its own errors go
    if out.launch_error and not failed:
        stderr += f"sandbox: the program could not be started: {out.launch_error}\n".encode()
    if unrunnable and run_end(out, mem, own_file) is RunEnd.EXITED:  # it ran, and made nothing to run
        stderr += f"\nsandbox: {unrunnable}\n".encode()
    return StepResult(
        end=end,
        exit_code=out.exit_code,
        signal=out.signal,
        wall_s=out.wall_s,
        cpu_s=out.cpu_s,
        max_rss_kb=out.max_rss_kb,
        stdout=out.stdout,
        stderr=stderr,
        timed_out=out.timed_out or out.signal == 24,
        output_exceeded=out.output_exceeded,
        memory_exceeded=mem and (compile_step or end is not RunEnd.COMPILE_ERROR),  # a source that never ran
        error=f"the program could not be started: {failed}" if failed else None,
        collected=out.collected,
        near_limit=max(out.wall_s, out.cpu_s or 0.0) >= NEAR_LIMIT * limits.wall_s,
    )
