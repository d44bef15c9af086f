"""How a group of programs is judged against its tests: which runs go to which worker together, in what
order, and when a program is not run against its next tests (early stop).

Stdin tests of a program go to a worker together, in parts when there are fewer programs than workers;
with early stop, in parts of 1, 2, 4, ... tests in order. A part goes in exchanges (:func:`exchanges`) each
judged as it comes back: what a program prints is held for one exchange, never for a request (every test's
output may be ``LIMITS__OUTPUT_BYTES``), what the server holds for an exchange (its outputs, inputs and files)
stays within what the default memory limit was fitted beside (``step_limits.held_mb``), and each test's stdin
is encoded once for all the programs of a request. A large comparison of outputs is made off the event loop,
in a place of the client's window and in its turn, charged to the memory budget while it waits (see
``off_loop``). Assert and call tests of every request go round by round (see :func:`_judge_asserts`). Where a
program stops never depends on timing: its verdict and its tests' are the judge's (``judge.py``), from its runs
in the tests' order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import languages
from ..agent.scratch_cost import files_cost
from ..backends.base import RunPolicy
from ..cache import stdin_digests
from ..executor import Executor, RunLimits, UnsupportedLanguage
from ..loop_turns import Turns
from ..models import EvaluateRequest, ProgramOut, Test, TestOut
from ..step_limits import held_mb
from ..verdicts import RunEnd, Verdict
from . import harness, judge
from .fan_out import all_of
from .off_loop import Comparisons


async def judge_requests(executor: Executor, reqs: list[EvaluateRequest], policy: RunPolicy) -> list[list[ProgramOut]]:
    """Each request's programs judged against its tests; the assert tests of them all together. Every run is
    made with ``policy`` (the route's: whether to cache, how long to queue, admitted as a whole or not)."""
    workers = executor.backend.status().get("workers", 1)
    judge.share_answer(reqs)
    comparisons = Comparisons(executor.backend.memory, policy)  # in its client's window and turn
    # The event loop's turns, counted across the requests' programs, exchanges and answers: those of cached runs
    # wait for nothing (262,144 tests of one program held every client 10 s: round 60; as many requests, 13 s: 61).
    turns = Turns()
    asserts: dict[int, languages.Language] = {}
    for i, req in enumerate(reqs):
        if (lang := _python_asserts(executor, req)) is not None:
            asserts[i] = lang

    async def stdio(req: EvaluateRequest) -> list[ProgramOut]:
        limits = executor.run_limits(req.limits.timeout_s, req.limits.memory_mb)
        compile_limits = executor.compile_limits(req.limits.compile_timeout_s)
        # A program's stdin tests go to a worker together (one exchange, and for Python one compile): in
        # parts only when there are fewer programs than workers, so that every worker has some.
        parts = max(1, workers // len(req.programs))
        chunk = -(-len(req.tests) // parts)
        stdins = [t.stdin.encode() if t.stdin else None for t in req.tests]  # bytes: shared by every program
        digests = stdin_digests(stdins) if policy.cache else None  # hashed once for them all, only for the cache
        judged = (
            _judge(executor, req, code, (stdins, digests), limits, compile_limits, chunk, policy, comparisons, turns)
            for code in req.programs
        )
        return await all_of(judged)

    others = [i for i in range(len(reqs)) if i not in asserts]
    judged_asserts, judged_others = await all_of(
        [
            _judge_asserts(
                executor, [(reqs[i], lang) for i, lang in asserts.items()], workers, policy, comparisons, turns
            ),
            all_of(stdio(reqs[i]) for i in others),
        ]
    )
    results = dict(zip(asserts, judged_asserts, strict=True)) | dict(zip(others, judged_others, strict=True))
    return [results[i] for i in range(len(reqs))]


def per_exchange(executor: Executor) -> int:
    """Tests of a program sent to a worker in one exchange at most: whatever they print, what comes back is
    within ``exchange_output_bytes``."""
    return max(1, executor.settings.exchange_output_bytes // executor.settings.limits.output_bytes)


def exchanges(
    executor: Executor, stdins: Sequence[bytes | None], tests: range, files: Mapping[str, tuple[bytes, int]]
) -> list[range]:
    """``tests`` (places in ``stdins``) cut in order into exchanges of at most :func:`per_exchange` tests, a test
    at least each, whose outputs (each test's at most its limit), inputs and ``files`` (the program's, held once
    an exchange) stay within what the default memory limit was fitted beside (``step_limits.held_mb``). Cut by
    outputs alone, 16 tests of 100 KB of input each were held past it, and every program of the request was
    refused."""
    room = (held_mb(executor.settings) << 20) - files_cost({name: data for name, (data, _) in files.items()})
    each, most = executor.settings.limits.output_bytes, per_exchange(executor)
    parts, start, held = [], tests.start, 0
    for i in tests:
        cost = each + len(stdins[i] or b"")
        if i > start and (held + cost > room or i - start == most):
            parts.append(range(start, i))
            start, held = i, 0
        held += cost
    if start < tests.stop:
        parts.append(range(start, tests.stop))
    return parts


def _python_asserts(executor: Executor, req: EvaluateRequest) -> languages.Language | None:
    """The language, when every test is an assert or call test and it runs them (see :func:`_judge_asserts`)."""
    try:
        lang = executor.language(req.language)
    except UnsupportedLanguage:
        return None
    runner = all(t.assert_code is not None or t.call is not None for t in req.tests)
    return lang if lang.in_process_python and runner else None


async def _judge_asserts(
    executor: Executor,
    reqs: list[tuple[EvaluateRequest, languages.Language]],
    workers: int,
    policy: RunPolicy,
    comparisons: Comparisons,
    turns: Turns,
) -> list[list[ProgramOut]]:
    """Assert and call tests, one round at a time: the first test of every program of every request, then the
    second.

    The runner (:data:`harness.ASSERT_MAIN`) is one file for every program and test: each run gets its
    program and tests on stdin. So a round's runs go to the workers in parts, each part in one exchange and
    one compile of the runner (see ``AgentWorker.run_tests``), whatever tasks they come from; every run
    still has a process of its own.
    """
    outs = [[list[TestOut]() for _ in req.programs] for req, _ in reqs]
    limits = [executor.run_limits(req.limits.timeout_s, req.limits.memory_mb) for req, _ in reqs]

    async def run(round_: int, lang: languages.Language, limits: RunLimits, runs: list[tuple[int, int]]) -> None:
        sources = {lang.source: (harness.ASSERT_MAIN.encode(), 0o644)}
        stdins = []
        for g, p in runs:
            req = reqs[g][0]
            stdins.append(harness.runner_stdin(req, req.programs[p], req.tests[round_]))
        # Parts of about a quarter of a worker's share: a worker that is done takes the next one, so that one
        # slow program leaves the others less idle at the end (a test series goes on from part to part); and
        # no larger than one exchange may be (see :func:`per_exchange`).
        size = min(-(-len(runs) // max(1, min(workers * 4, len(runs)))), per_exchange(executor))
        parts = [
            part
            for k in range(0, len(runs), size)
            for part in exchanges(executor, stdins, range(k, min(k + size, len(runs))), sources)
        ]

        files = executor.files_digest(sources) if policy.cache else ""  # once for the round's exchanges

        async def part(indices: range) -> list[TestOut]:
            """One exchange, judged as it comes back: its outputs are let go before the round ends."""
            runs_stdins: list[bytes | None] = [stdins[i] for i in indices]
            steps = await executor.run_tests(
                lang, sources, runs_stdins, limits, policy, shared=True, files_digest=files, turns=turns
            )
            judged = [reqs[runs[i][0]][0] for i in indices]
            made: list[TestOut] = []
            for r, step in zip(judged, steps, strict=True):
                made.append(await judge.test_out(r, r.tests[round_], step, comparisons))
                await turns.done()
            return made

        for indices, judged in zip(parts, await all_of(part(p) for p in parts), strict=True):
            for i, out in zip(indices, judged, strict=True):
                g, p = runs[i]
                outs[g][p].append(out)

    for round_ in range(max((len(req.tests) for req, _ in reqs), default=0)):
        # This round's runs, by what a worker runs them with. With early stop, a program that failed a
        # test is not run against the next ones.
        groups: dict[tuple[str, RunLimits], list[tuple[int, int]]] = {}
        for g, (req, lang) in enumerate(reqs):
            if round_ < len(req.tests):
                for p, tests in enumerate(outs[g]):
                    if not req.early_stop or all(t.verdict is Verdict.AC for t in tests):
                        groups.setdefault((lang.name, limits[g]), []).append((g, p))
        await all_of(run(round_, executor.language(name), lim, r) for (name, lim), r in groups.items())
    answers: list[list[ProgramOut]] = []
    for (req, _), programs in zip(reqs, outs, strict=True):
        answers.append([judge.program_out(req, tests) for tests in programs])
        await turns.done(len(programs))
    return answers


async def _judge(
    executor: Executor,
    req: EvaluateRequest,
    code: str,
    inputs: tuple[list[bytes | None], list[str] | None],
    limits: RunLimits,
    compile_limits: RunLimits,
    chunk: int,
    policy: RunPolicy,
    comparisons: Comparisons,
    turns: Turns,
) -> ProgramOut:
    total, (stdins, digests) = len(req.tests), inputs
    try:
        lang = executor.language(req.language)
    except UnsupportedLanguage as exc:
        return judge.sandbox_error(req, str(exc))
    needs_python = any(t.call is not None or t.assert_code is not None for t in req.tests)
    if needs_python and not lang.in_process_python:
        return judge.sandbox_error(req, "call and assert tests need Python")
    compiled, sources = await executor.build(lang, code, {}, compile_limits, policy)
    if compiled is not None and compiled.end is not RunEnd.EXITED:
        return judge.compile_failed(req, compiled)

    async def one(i: int) -> TestOut:
        return await _run_test(executor, req, lang, code, sources, req.tests[i], stdins[i], limits, policy, comparisons)

    files = executor.files_digest(sources) if digests else ""  # once for the program's exchanges

    async def batch(tests: range) -> list[TestOut]:
        """The tests, in exchanges (:func:`exchanges`) one after another, each judged as it comes back."""
        outs: list[TestOut] = []
        for part in exchanges(executor, stdins, tests, sources):
            own = [digests[i] for i in part] if digests else None
            inputs = [stdins[i] for i in part]
            steps = await executor.run_tests(
                lang, sources, inputs, limits, policy, digests=own, files_digest=files, turns=turns
            )
            for i, step in zip(part, steps, strict=True):
                outs.append(await judge.test_out(req, req.tests[i], step, comparisons))
                await turns.done()
        return outs

    outs: list[TestOut] = []
    if all(t.expected_stdout is not None for t in req.tests):
        if req.early_stop:
            # Parts of 1, 2, 4, ... tests in order: a program that fails early costs few runs, one that
            # passes costs few exchanges, and where it stops never depends on timing.
            size, done = 1, 0
            while done < total and all(o.verdict is Verdict.AC for o in outs):
                outs += await batch(range(done, min(done + size, total)))
                done, size = done + size, size * 2
            bad = next((i for i, o in enumerate(outs) if o.verdict is not Verdict.AC), None)
            outs = outs if bad is None else outs[: bad + 1]
        else:
            parts = [range(i, min(i + chunk, total)) for i in range(0, total, chunk)]
            outs = [o for part in await all_of(batch(p) for p in parts) for o in part]
    elif req.early_stop:
        # Tests run one after another in their given order, so where a program stops never depends on
        # which test happened to finish first.
        for i in range(total):
            outs.append(await one(i))
            if outs[-1].verdict is not Verdict.AC:
                break
    else:
        outs = await all_of(one(i) for i in range(total))
    return judge.program_out(req, outs, compiled)


async def _run_test(
    executor: Executor,
    req: EvaluateRequest,
    lang: languages.Language,
    code: str,
    sources: dict[str, tuple[bytes, int]],
    test: Test,
    stdin: bytes | None,
    limits: RunLimits,
    policy: RunPolicy,
    comparisons: Comparisons,
) -> TestOut:
    if test.call is not None or test.assert_code is not None:
        sources = {**sources, lang.source: (harness.ASSERT_MAIN.encode(), 0o644)}
        stdin = harness.runner_stdin(req, code, test)
    step = await executor.run_built(lang, sources, stdin, limits, policy)
    return await judge.test_out(req, test, step, comparisons)
