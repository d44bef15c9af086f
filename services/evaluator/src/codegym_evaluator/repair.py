"""Rounds of execution feedback (``codegym-eval run --turns K``): a wrong answer is shown what its program did on
the tests a model may see, and the model answers again; each new answer is judged on all the task's tests.

Which tests the feedback shows is :meth:`Task.visible_tests <codegym_evaluator.tasks.Task.visible_tests>` with
``--public-tests``, the rule every front door shares: a task's public tests where its dataset splits them from
hidden ones (CodeContests, LiveCodeBench, MBPP's prompt tests), so nothing hidden reaches the prompt; else the
first ``public_tests`` of its tests, which also judge the answer, always leaving one hidden (HumanEval, APPS,
TACO, LeetCode have no split: there the repair sees a test it is judged on, as LiveCodeBench's self-repair shows
its failing test). A sample whose task shows no test gets no feedback, and is not asked again.

Turn ``t`` answers the chat of turns ``1..t-1`` (:func:`~codegym_evaluator.prompts.repair_messages`). A sample
that passed, or whose last answer the sandbox could not judge (SE: a re-run asks again), is not asked again.
Every answer is kept in ``completions.jsonl`` with the feedback it read, every judgement in ``results.jsonl``
with its ``turn``, so a re-run resumes at the first turn of each sample that is missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from codegym_sandbox.client import SandboxError
from codegym_sandbox.models import ProgramOut, Test
from codegym_sandbox.verdicts import Verdict

from .config import RunConfig
from .feedback import test_feedback
from .model_client import ModelClient, ModelError, Sampling
from .prompts import repair_messages
from .results import RunStore
from .scoring import Scorer, Unavailable, build_program, evaluate_body
from .tasks import Task

Row = dict[str, Any]  # a line of results.jsonl


def still_wrong(row: Row | None) -> bool:
    """A judged answer that failed (not AC, and not SE: the sandbox's failure says nothing of the program)."""
    return row is not None and row["verdict"] not in (Verdict.AC, Verdict.SE)


class Repairs:
    """The turns after the first of one run: asks ``client`` again for the samples that failed, judges with
    ``scorer``, appends to ``store``. ``progress(more, done)`` counts the work: ``more`` answers to judge, then
    ``done`` judged."""

    def __init__(
        self,
        config: RunConfig,
        store: RunStore,
        scorer: Scorer,
        client: ModelClient,
        progress: Callable[[int, int], None],
    ) -> None:
        self.config = config
        self.store = store
        self.scorer = scorer
        self.client = client
        self.progress = progress
        self.later = {k: r for k, r in store.turn_results().items() if k[2] > 1}
        self.asked = {k: r for k, r in store.turn_completions().items() if k[2] > 1}

    def _judged(self, task: Task, i: int, turn: int) -> bool:
        row = self.later.get((task.task_id, i, turn))
        return row is not None and row["verdict"] != Verdict.SE

    async def task(self, task: Task, first: dict[int, Row], stop: asyncio.Event) -> None:
        """Turns 2..K of ``task``'s samples, whose first answers' results are ``first``; raises ``ModelError``
        (after judging what was answered) when the model fails."""
        current = {i: row for i, row in first.items() if still_wrong(row)}
        for turn in range(2, self.config.turns + 1):
            if not current or stop.is_set():
                return
            todo = [i for i in sorted(current) if not self._judged(task, i, turn)]
            if todo:
                self.progress(len(todo), 0)
                new, wait = await self._turn(task, turn, todo, first)
                self.progress(0, sum(1 for r in new.values() if r["verdict"] != Verdict.SE))
                if wait is not None:
                    raise wait
            now = {i: self.later.get((task.task_id, i, turn)) for i in sorted(current)}
            current = {i: row for i, row in now.items() if row is not None and still_wrong(row)}

    async def _turn(
        self, task: Task, turn: int, todo: list[int], first: dict[int, Row]
    ) -> tuple[dict[int, Row], ModelError | None]:
        """Ask and judge ``todo``'s samples at ``turn``: their rows, and the model's failure if there was one."""
        key = task.task_id
        feedback = {i: str(self.asked[(key, i, turn)]["feedback"]) for i in todo if (key, i, turn) in self.asked}
        new_feedback = await self._feedback(task, [i for i in todo if i not in feedback], turn, first)
        feedback.update(new_feedback)
        answers = {i: str(self.asked[(key, i, turn)]["completion"]) for i in feedback if i not in new_feedback}
        asks = sorted(new_feedback)
        got = await asyncio.gather(
            *(self._ask(task, i, turn, first, new_feedback[i]) for i in asks), return_exceptions=True
        )
        error: ModelError | None = None
        for i, answer in zip(asks, got, strict=True):
            if isinstance(answer, ModelError):
                error = error or answer
            elif isinstance(answer, BaseException):
                raise answer
            else:
                answers[i] = answer
        order = sorted(answers)
        scores = await self.scorer.score_group(task, [answers[i] for i in order], extract=self.config.extract != "none")
        rows = self.store.add_results(task, [(i, answers[i], s) for i, s in zip(order, scores, strict=True)], turn)
        for row in rows:
            self.later[(key, int(row["sample"]), turn)] = row
        return {int(r["sample"]): r for r in rows}, error

    def _history(self, task: Task, i: int, turn: int, first: dict[int, Row], feedback: str) -> list[tuple[str, str]]:
        """The rounds (answer, feedback on it) before ``turn``, the last one's feedback being ``feedback``."""
        key = task.task_id
        answers = [str(first[i]["completion"])] + [str(self.later[(key, i, t)]["completion"]) for t in range(2, turn)]
        readings = [str(self.asked[(key, i, t)]["feedback"]) for t in range(2, turn)] + [feedback]
        return list(zip(answers, readings, strict=True))

    async def _ask(self, task: Task, i: int, turn: int, first: dict[int, Row], feedback: str) -> str:
        messages = repair_messages(task, self._history(task, i, turn, first, feedback))
        c = self.config
        sampling = Sampling(n=1, temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_tokens)
        (answer,) = await self.client.generate(messages, sampling)
        self.store.add_repair(task.task_id, i, turn, feedback, answer)
        self.asked[(task.task_id, i, turn)] = {"feedback": feedback, "completion": answer}
        return answer

    async def _feedback(self, task: Task, todo: list[int], turn: int, first: dict[int, Row]) -> dict[int, str]:
        """The feedback on each sample's answer of ``turn - 1``: its program run on the visible tests. A sample
        whose run the sandbox failed gets none (it is not asked this time; a re-run asks again); nor does one
        whose task shows no test."""
        tests = task.visible_tests(self.config.public_tests)
        if not todo or not tests:
            return {}
        previous = {i: first[i] if turn == 2 else self.later[(task.task_id, i, turn - 1)] for i in todo}
        programs = {i: build_program(task, str(previous[i]["code"])) for i in todo}
        outs = await self._run_shown(replace(task, tests=tests), list(programs.values()))
        models = [Test.model_validate(t) for t in tests]
        return {
            i: test_feedback(models, out)
            for i, program in programs.items()
            if isinstance(out := outs[program], ProgramOut) and out.verdict is not Verdict.SE
        }

    async def _run_shown(self, shown: Task, programs: list[str]) -> dict[str, ProgramOut | Unavailable]:
        """Each program's results on ``shown``'s tests, asked again on SE as every route does (the sandbox's
        result cache answers the runs it judged a moment ago)."""
        scorer = self.scorer

        async def ask(pending: list[str]) -> list[ProgramOut | Unavailable]:
            body = evaluate_body(shown, pending, timeout_s=scorer.timeout_per_test, cache=scorer.cache)
            return list((await scorer.client.evaluate(body)).results)

        def unavailable(exc: SandboxError) -> ProgramOut | Unavailable:
            return Unavailable(f"sandbox unavailable: {exc}")

        return await scorer.ask_again.each(programs, ask, unavailable)
