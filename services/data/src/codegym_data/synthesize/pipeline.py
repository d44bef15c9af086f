"""Generate candidate problems with a model, test their tests in the sandbox, and keep the good ones.

For every candidate, in this order (the first failure is its rejection reason, see ``report.REASONS``):

1. the answer parses (``parse``), does not copy the prompt's example or seed problem, has ``min_tests`` tests,
   and its reference does not return one constant (``checks``);
2. the sandbox judges the reference and its stand-ins (``checks.stand_ins``) in one batch over all candidates:
   the reference must pass every test, and neither stand-in may;
3. the sandbox judges ``mutants`` mutants of each remaining reference (``mutants``), again in one batch: the
   tests must kill (any verdict but AC) at least ``min_mutation_score`` of those it judged;
4. in the order the candidates were asked for, a survivor whose normalised reference or problem statement
   repeats a kept one's is a duplicate.

Stand-ins and mutants are only judged for candidates that got that far, so a run of mostly broken answers
costs the sandbox little.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codegym_evaluator.model_client import ModelClient, ModelError, Sampling
from codegym_evaluator.scoring import Score, Scorer
from codegym_evaluator.tasks import Task, write_task_file
from codegym_sandbox.verdicts import Verdict

from ..output import output_paths, write_jsonl, write_report
from . import checks, prompts
from .config import SynthesizeConfig
from .mutants import generate_mutants
from .parse import Candidate, Malformed, parse_answer
from .report import OperatorStats, SynthesisReport

Progress = Callable[[str, int, int], None]  # (stage, done, total): "generating", "references", "mutants"

_EXAMPLE = parse_answer(prompts.EXAMPLE_ANSWER)


@dataclass
class Outcome:
    """One candidate: what was asked, what came back, and either the kept task or why it was rejected."""

    index: int
    topic: str
    answer: str | None = None
    reason: str | None = None  # None while it is checked, and for a kept candidate
    detail: str = ""
    candidate: Candidate | None = None
    task: Task | None = None
    seed_problem: str | None = None
    mutation_score: float | None = None
    mutants_killed: int = 0
    mutants_judged: int = 0
    survivors: list[str] = field(default_factory=list)  # "operator@line" of each mutant the tests let pass

    @property
    def open(self) -> bool:
        """Still being checked: neither rejected nor known to be kept."""
        return self.reason is None

    def reject(self, reason: str, detail: str = "") -> None:
        self.reason, self.detail = reason, detail

    def to_dict(self) -> dict[str, Any]:
        """A line of ``rejected.jsonl``: the reason, the parsed candidate when there is one, and the answer."""
        c = self.candidate
        return {
            "index": self.index,
            "topic": self.topic,
            "reason": self.reason,
            "detail": self.detail,
            "entry_point": c.entry_point if c else None,
            "problem": c.problem if c else None,
            "solution": c.solution if c else None,
            "tests": list(c.tests) if c else None,
            "mutation_score": self.mutation_score,
            "survivors": self.survivors,
            "answer": self.answer,
        }


@dataclass
class SynthesisRun:
    """Every candidate's outcome and the report; ``tasks`` are the kept problems, in the order asked for."""

    outcomes: list[Outcome]
    report: SynthesisReport

    @property
    def tasks(self) -> list[Task]:
        return [o.task for o in self.outcomes if o.reason is None and o.task is not None]

    @property
    def rejected(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.reason is not None]

    def write(self, directory: str | Path) -> dict[str, Path]:
        """Write ``tasks.jsonl`` (codegym's task format), ``report.md``, ``report.json`` and ``rejected.jsonl``
        into ``directory``; the paths by name."""
        paths = output_paths(directory, "tasks.jsonl", "rejected.jsonl")
        write_task_file(self.tasks, paths["tasks.jsonl"])
        write_report(self.report, paths)
        write_jsonl(paths["rejected.jsonl"], (outcome.to_dict() for outcome in self.rejected))
        return paths


def _settings(config: SynthesizeConfig) -> dict[str, Any]:
    keys = (
        "count",
        "temperature",
        "top_p",
        "max_tokens",
        "min_tests",
        "mutants",
        "min_mutation_score",
        "max_problem_similarity",
        "seed_dataset",
        "timeout_per_test",
    )
    return {k: getattr(config, k) for k in keys}


async def generate(
    requests: Sequence[prompts.Request], model: ModelClient, config: SynthesizeConfig, progress: Progress | None = None
) -> list[Outcome]:
    """Ask the model for every request at once (the client bounds requests in flight); a request that fails
    for good is an outcome rejected as ``model_error``, not the end of the run."""
    outcomes = [Outcome(r.index, r.topic, seed_problem=r.seed_problem) for r in requests]
    done = 0
    if progress is not None:
        progress("generating", 0, len(requests))

    async def one(request: prompts.Request, outcome: Outcome) -> None:
        nonlocal done
        sampling = Sampling(
            n=1,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens,
            seed=request.sampling_seed,
        )
        try:
            outcome.answer = (await model.generate(request.messages, sampling))[0]
        except ModelError as exc:
            outcome.reject("model_error", str(exc))
        done += 1
        if progress is not None:
            progress("generating", done, len(requests))

    await asyncio.gather(*(one(r, o) for r, o in zip(requests, outcomes, strict=True)))
    return outcomes


def _task(outcome: Outcome, candidate: Candidate, model: str, seed: int) -> Task:
    digest = hashlib.sha1(checks.normalised(candidate.solution).encode()).hexdigest()[:8]
    example = candidate.tests[0].splitlines()[-1]
    prompt = (
        f"{candidate.problem}\n\nWrite a Python function `{candidate.signature}`. Your code should pass "
        f"tests like this one:\n\n{example}\n"
    )
    origin = {"model": model, "seed": seed, "index": outcome.index, "topic": outcome.topic}
    return Task(
        task_id=f"synth/{candidate.entry_point}-{digest}",
        prompt=prompt,
        kind="assert",
        tests=[{"assert_code": code} for code in candidate.tests],
        entry_point=candidate.entry_point,
        metadata={"canonical_solution": candidate.solution, "synthesized": origin},
    )


def check_statically(outcome: Outcome, config: SynthesizeConfig, model: str) -> None:
    """Parse the answer and run the checks that need no sandbox; reject ``outcome`` or give it its task."""
    assert outcome.answer is not None
    try:
        candidate = parse_answer(outcome.answer)
    except Malformed as exc:
        outcome.reject(exc.reason, exc.detail)
        return
    outcome.candidate = candidate
    words = checks.problem_words(candidate.problem)
    shown = [_EXAMPLE.problem] + ([outcome.seed_problem] if outcome.seed_problem else [])
    copied = [p for p in shown if checks.similarity(words, checks.problem_words(p)) >= config.max_problem_similarity]
    if copied or checks.normalised(candidate.solution) == checks.normalised(_EXAMPLE.solution):
        outcome.reject("copied_prompt", "the problem" if copied else "the solution")
    elif len(candidate.tests) < config.min_tests:
        outcome.reject("too_few_tests", f"{len(candidate.tests)} < {config.min_tests}")
    elif checks.constant_return(candidate.solution, candidate.entry_point):
        outcome.reject("trivial_constant")
    else:
        outcome.task = _task(outcome, candidate, model, config.seed)


def _failure(task: Task, score: Score) -> str:
    failing = next((i for i, v in enumerate(score.test_verdicts) if v is not Verdict.AC), None)
    where = f"; first failing test: {task.tests[failing]['assert_code']!r}" if failing is not None else ""
    return f"{score.verdict}, {score.passed}/{score.total} tests passed{where}"


async def judge_references(outcomes: Sequence[Outcome], scorer: Scorer, progress: Progress | None = None) -> None:
    """Each open candidate's reference and stand-ins, all candidates in one batch: the reference must pass,
    the stand-ins must not."""
    todo = [o for o in outcomes if o.open and o.task is not None]
    done = 0
    if progress is not None:
        progress("references", 0, len(todo))

    async def one(outcome: Outcome) -> None:
        nonlocal done
        task, candidate = outcome.task, outcome.candidate
        assert task is not None and candidate is not None
        stand_ins = checks.stand_ins(candidate.solution, candidate.entry_point)
        scores = await scorer.score_group(task, [candidate.solution, *stand_ins.values()], extract=False)
        reference, others = scores[0], dict(zip(stand_ins, scores[1:], strict=True))
        if any(s.sandbox_error for s in scores):
            outcome.reject("sandbox_error", next(s.error or "" for s in scores if s.sandbox_error))
        elif reference.verdict is not Verdict.AC:
            outcome.reject("reference_fails", _failure(task, reference))
        elif passing := [reason for reason, score in others.items() if score.verdict is Verdict.AC]:
            outcome.reject(passing[0])
        done += 1
        if progress is not None:
            progress("references", done, len(todo))

    await asyncio.gather(*(one(o) for o in todo))


async def judge_mutants(
    outcomes: Sequence[Outcome],
    scorer: Scorer,
    config: SynthesizeConfig,
    operators: dict[str, OperatorStats],
    progress: Progress | None = None,
) -> None:
    """Each open candidate's mutants against its tests, all candidates in one batch; the mutation score is the
    share of judged mutants that fail some test."""
    todo = [o for o in outcomes if o.open and o.task is not None]
    done = 0
    if progress is not None:
        progress("mutants", 0, len(todo))

    async def one(outcome: Outcome) -> None:
        nonlocal done
        task, candidate = outcome.task, outcome.candidate
        assert task is not None and candidate is not None
        rng = random.Random(f"{config.seed}/mutants/{outcome.index}")
        mutants = generate_mutants(candidate.solution, config.mutants, rng)
        if not mutants:
            outcome.reject("no_mutants")
        else:
            scores = await scorer.score_group(task, [m.code for m in mutants], extract=False)
            judged = [(m, s) for m, s in zip(mutants, scores, strict=True) if not s.sandbox_error]
            for mutant, score in judged:
                stats = operators.setdefault(mutant.operator, OperatorStats())
                stats.mutants += 1
                stats.killed += score.verdict is not Verdict.AC
            outcome.survivors = [f"{m.operator}@{m.line}" for m, s in judged if s.verdict is Verdict.AC]
            outcome.mutants_judged = len(judged)
            outcome.mutants_killed = len(judged) - len(outcome.survivors)
            if not judged:
                outcome.reject("sandbox_error", next(s.error or "" for s in scores))
            else:
                outcome.mutation_score = outcome.mutants_killed / outcome.mutants_judged
                if outcome.mutation_score < config.min_mutation_score:
                    detail = f"{outcome.mutants_killed}/{outcome.mutants_judged} killed; survivors: "
                    outcome.reject("weak_tests", detail + ", ".join(outcome.survivors))
        done += 1
        if progress is not None:
            progress("mutants", done, len(todo))

    await asyncio.gather(*(one(o) for o in todo))


def drop_duplicates(outcomes: Sequence[Outcome], max_similarity: float) -> None:
    """Reject, in order, every open candidate whose normalised reference or problem repeats a kept one's."""
    kept: list[tuple[str, list[str], str]] = []  # normalised solution, problem words, task id
    for outcome in outcomes:
        if not outcome.open or outcome.task is None or outcome.candidate is None:
            continue
        solution = checks.normalised(outcome.candidate.solution)
        words = checks.problem_words(outcome.candidate.problem)
        same = next((task_id for s, _, task_id in kept if s == solution), None)
        if same is not None:
            outcome.reject("duplicate_solution", f"as {same}")
            continue
        near = next((t for _, w, t in kept if checks.similarity(words, w) >= max_similarity), None)
        if near is not None:
            outcome.reject("duplicate_problem", f"as {near}")
            continue
        kept.append((solution, words, outcome.task.task_id))


async def judge(
    outcomes: Sequence[Outcome], config: SynthesizeConfig, scorer: Scorer, model: str, progress: Progress | None = None
) -> SynthesisReport:
    """Every check on the generated ``outcomes`` (changed in place); the report of the run."""
    start = time.monotonic()
    for outcome in outcomes:
        if outcome.open:
            check_statically(outcome, config, model)
    report = SynthesisReport(model, config.seed, _settings(config), candidates=len(outcomes))
    await judge_references(outcomes, scorer, progress)
    await judge_mutants(outcomes, scorer, config, report.operators, progress)
    drop_duplicates(outcomes, config.max_problem_similarity)
    report.judge_s = time.monotonic() - start
    for outcome in outcomes:
        if outcome.mutation_score is not None:
            report.judged_scores.append(outcome.mutation_score)
        if outcome.reason is None:
            report.kept += 1
            assert outcome.mutation_score is not None
            report.kept_scores.append(outcome.mutation_score)
            if outcome.task is not None:  # the kept task says how well its tests did
                scores = {
                    "mutation_score": outcome.mutation_score,
                    "mutants_killed": outcome.mutants_killed,
                    "mutants_judged": outcome.mutants_judged,
                }
                outcome.task.metadata["synthesized"].update(scores)
        else:
            report.rejected[outcome.reason] += 1
    return report


async def synthesize(
    config: SynthesizeConfig,
    model: ModelClient,
    scorer: Scorer,
    *,
    seeds: Sequence[Task] = (),
    progress: Progress | None = None,
) -> SynthesisRun:
    """Ask ``model`` for ``config.count`` candidates (topics from ``seeds`` when given), judge them through
    ``scorer``, and return every outcome with the report."""
    requests = prompts.build_requests(config.count, config.seed, config.min_tests, seeds)
    start = time.monotonic()
    outcomes = await generate(requests, model, config, progress)
    generate_s = time.monotonic() - start
    report = await judge(outcomes, config, scorer, model.model, progress)
    report.generate_s = generate_s
    return SynthesisRun(outcomes, report)
