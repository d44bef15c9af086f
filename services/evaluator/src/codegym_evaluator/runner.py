"""An evaluation run: tasks → completions (a samples file or a model) → sandbox verdicts → summary and report.

Every judged sample is appended to ``results.jsonl`` as soon as it is known, and every generated one to
``completions.jsonl``, so a run that stops (a model endpoint down, Ctrl-C) keeps its partial results and a
re-run with the same ``--output`` only does what is missing (samples that got a sandbox error included).
With ``turns`` > 1 the samples that failed are answered again after feedback (``repair``), task by task as
their first answers are judged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

import httpx

from .config import RunConfig
from .evaluate import EvalSummary
from .model_client import ModelClient, ModelError, Sampling
from .prompts import base_answer, base_prompt, chat_messages, stop_sequences
from .repair import Repairs
from .results import RunStore, score_of, task_results
from .samples import read_samples
from .scoring import Scorer
from .tasks import Task, load_tasks, select_tasks
from .turn_stats import TurnsSummary, turns_summary

Progress = Callable[[int, int], None]  # (samples done, samples in all)


@dataclass
class RunOutcome:
    """The summary of every judged sample in the output directory (of the first answers; ``turns``: pass@1
    after each turn of feedback, with ``--turns``), and why the run stopped early, if it did."""

    summary: EvalSummary
    tasks: list[Task]
    error: str | None = None
    turns: TurnsSummary | None = None


@contextlib.asynccontextmanager
async def _model(config: RunConfig, transport: httpx.AsyncBaseTransport | None) -> AsyncIterator[ModelClient]:
    assert config.base_url is not None
    client = ModelClient(
        config.base_url,
        config.model or "",
        api_key=config.api_key,
        api="chat" if config.api == "chat" else "completion",
        concurrency=config.model_concurrency,
        retries=config.model_retries,
        transport=transport,
    )
    try:
        if not config.model:
            try:
                listed = await client.models()
            except ModelError as exc:
                raise ModelError(f"could not list the models of {config.base_url} ({exc}); pass --model") from None
            if not listed:
                raise ModelError(f"{config.base_url} lists no model; pass --model")
            client.model = listed[0]
        yield client
    finally:
        await client.aclose()


async def _complete(client: ModelClient, config: RunConfig, task: Task, n: int) -> list[str]:
    sampling = Sampling(n=n, temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens)
    if config.api == "chat":
        return await client.generate(chat_messages(task), sampling)
    stops = stop_sequences(task, chat=False)
    texts = await client.generate(base_prompt(task), Sampling(**{**sampling.__dict__, "stop": stops}))
    return [base_answer(task, t) for t in texts]


async def run_evaluation(
    config: RunConfig,
    *,
    sandbox_transport: httpx.AsyncBaseTransport | None = None,
    model_transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunOutcome:
    """Run (or resume) ``config`` against running servers: ``config.sandbox_url`` and, without
    ``config.samples``, ``config.base_url``. Model failures end the run with ``error`` set; what was
    judged before is kept and summarised."""
    if not config.sandbox_url:
        raise ValueError("run_evaluation needs a sandbox URL (the CLI starts a local sandbox when none is given)")
    if config.samples is None and config.base_url is None:
        raise ValueError("run_evaluation needs --samples or a model endpoint (--base-url)")
    if (problem := config.problem()) is not None:
        raise ValueError(problem)
    every = load_tasks(config.dataset, split=config.split, path=config.path)
    tasks = select_tasks(every, difficulty=config.difficulty, limit=config.limit, dataset=config.dataset)
    store = RunStore(config.output)
    store.check_run(config.identity(), {"turns": config.turns})
    given = read_samples(config.samples, [t.task_id for t in every]) if config.samples else None
    if given is not None:
        tasks = [t for t in tasks if t.task_id in given]
    want = {t.task_id: len(given[t.task_id]) if given else config.n for t in tasks}
    first = store.results()
    judged = {key for key, row in first.items() if score_of(row).judged}  # a sample with an SE test is asked again
    stored = store.completions()
    total = sum(want.values())
    done = sum(1 for t in tasks for i in range(want[t.task_id]) if (t.task_id, i) in judged)
    if progress:
        progress(done, total)
    stop = asyncio.Event()
    errors: list[str] = []
    which: Literal["first", "last"] = "first" if config.extract == "first" else "last"

    async with (
        Scorer(
            config.sandbox_url,
            token=config.sandbox_token,
            concurrency=config.concurrency,
            retries=config.retries,
            timeout_per_test=config.timeout_per_test,
            transport=sandbox_transport,
            which=which,
        ) as scorer,
        contextlib.AsyncExitStack() as stack,
    ):
        client = await stack.enter_async_context(_model(config, model_transport)) if given is None else None

        def count(more: int, now_done: int) -> None:
            nonlocal done, total
            total, done = total + more, done + now_done
            if progress:
                progress(done, total)

        repairs = Repairs(config, store, scorer, client, count) if client is not None and config.turns > 1 else None

        async def one(task: Task) -> None:
            await first_answers(task)
            if repairs is None or stop.is_set():
                return
            rows = {i: row for i in range(want[task.task_id]) if (row := first.get((task.task_id, i))) is not None}
            try:
                await repairs.task(task, rows, stop)
            except ModelError as exc:
                if not stop.is_set():
                    errors.append(str(exc))
                stop.set()

        async def first_answers(task: Task) -> None:
            todo = [i for i in range(want[task.task_id]) if (task.task_id, i) not in judged]
            if not todo or stop.is_set():
                return
            texts: dict[int, str] = {}
            if given is not None:
                texts = {i: given[task.task_id][i] for i in todo}
            else:
                texts = {i: stored[(task.task_id, i)] for i in todo if (task.task_id, i) in stored}
                missing = [i for i in todo if i not in texts]
                if missing:
                    assert client is not None
                    try:
                        new = await _complete(client, config, task, len(missing))
                    except ModelError as exc:
                        if not stop.is_set():
                            errors.append(str(exc))
                        stop.set()
                        return
                    store.add_completions(task.task_id, zip(missing, new, strict=True))
                    texts.update(zip(missing, new, strict=True))
            order = sorted(texts)
            scores = await scorer.score_group(task, [texts[i] for i in order], extract=config.extract != "none")
            rows = store.add_results(task, [(i, texts[i], s) for i, s in zip(order, scores, strict=True)])
            first.update({(task.task_id, int(r["sample"])): r for r in rows})
            count(0, sum(1 for s in scores if s.judged))

        await asyncio.gather(*(one(t) for t in tasks))

    summary = EvalSummary.from_results(task_results(tasks, store.results()), ks=config.k)
    turns = turns_summary(tasks, store.turn_results(), config.turns) if config.turns > 1 else None
    return RunOutcome(summary=summary, tasks=tasks, error=errors[0] if errors else None, turns=turns)
